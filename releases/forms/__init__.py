from releases.forms.lists import ReleaseListFilter, ServiceCatalogFilter
from releases.forms.release import ReleaseForm
from releases.forms.review import CommentForm, SignOffForm, WaiverForm

__all__ = [
    "CommentForm",
    "ReleaseForm",
    "ReleaseListFilter",
    "ServiceCatalogFilter",
    "SignOffForm",
    "WaiverForm",
]
