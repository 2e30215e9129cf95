"""The ledger's domain layer: every change to what the ledger says goes through here.

Split by feature; import the verbs from this package (`from ledger import services`).
"""

from ledger.services.accounts import *  # noqa: F403
from ledger.services.accounts import __all__ as _accounts_all
from ledger.services.evidence import *  # noqa: F403
from ledger.services.evidence import __all__ as _evidence_all
from ledger.services.gateway_policies import *  # noqa: F403
from ledger.services.gateway_policies import __all__ as _gateway_policies_all
from ledger.services.licenses import *  # noqa: F403
from ledger.services.licenses import __all__ as _licenses_all
from ledger.services.price_sheets import *  # noqa: F403
from ledger.services.price_sheets import __all__ as _price_sheets_all
from ledger.services.registry import *  # noqa: F403
from ledger.services.registry import __all__ as _registry_all
from ledger.services.run_evidence import *  # noqa: F403
from ledger.services.run_evidence import __all__ as _run_evidence_all

__all__ = [*_registry_all, *_licenses_all, *_evidence_all, *_run_evidence_all, *_accounts_all]
__all__ += _gateway_policies_all
__all__ += _price_sheets_all
