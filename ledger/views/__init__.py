"""Pages of the registry, one module per feature; `home` stays importable here."""

from ledger.views.home import home

__all__ = ["home"]
