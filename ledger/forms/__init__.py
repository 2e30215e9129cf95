"""Forms of the registry pages, split by feature: shared inputs, the object
forms, and the list filters. Import them from here."""

from ledger.forms.evidence import LoadTestUploadForm
from ledger.forms.inputs import CommaListField, InlineValidationMixin, PrettyJSONField
from ledger.forms.lists import (
    AssetListFilter,
    CatalogFilter,
    EventListFilter,
    LiveFilterSet,
    RuntimeListFilter,
)
from ledger.forms.registry import (
    ASSET_FIELDS,
    AssetForm,
    CapabilityForm,
    LifecycleForm,
    RevisionForm,
    RuntimeForm,
    ServiceForm,
)

__all__ = [
    "ASSET_FIELDS",
    "AssetForm",
    "AssetListFilter",
    "CapabilityForm",
    "CatalogFilter",
    "CommaListField",
    "EventListFilter",
    "InlineValidationMixin",
    "LifecycleForm",
    "LiveFilterSet",
    "LoadTestUploadForm",
    "PrettyJSONField",
    "RevisionForm",
    "RuntimeForm",
    "RuntimeListFilter",
    "ServiceForm",
]
