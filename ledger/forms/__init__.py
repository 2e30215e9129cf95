"""Forms of the registry pages, split by feature: shared inputs, the object
forms, and the list filters. Import them from here."""

from ledger.forms.evidence import LoadTestUploadForm
from ledger.forms.licenses import LicenseAcceptanceForm, LicenseReviewForm
from ledger.forms.lists import (
    AssetListFilter,
    CatalogFilter,
    EventListFilter,
    RuntimeListFilter,
)
from ledger.forms.price_sheets import PriceSheetForm
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
    "EventListFilter",
    "LicenseAcceptanceForm",
    "LicenseReviewForm",
    "LifecycleForm",
    "LoadTestUploadForm",
    "PriceSheetForm",
    "RevisionForm",
    "RuntimeForm",
    "RuntimeListFilter",
    "ServiceForm",
]
