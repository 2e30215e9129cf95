"""Shapes of the replay REST API. Serializers validate and shape; writes go through `replay.services`.

Related objects are named by their natural keys (backend name, sample set
`name@version`, service slug); people only by username. A backend's credential
is only ever the *name* of the environment variable that holds it.
"""

from replay.serializers.backends import (
    BackendDetailSerializer,
    BackendSerializer,
    BackendUpdateSerializer,
    ProbeSerializer,
)
from replay.serializers.runs import (
    ResultSerializer,
    RunDetailSerializer,
    RunSerializer,
    RunStartSerializer,
)
from replay.serializers.sample_sets import (
    SampleSerializer,
    SampleSetDetailSerializer,
    SampleSetImportSerializer,
    SampleSetSerializer,
)

__all__ = [
    "BackendDetailSerializer",
    "BackendSerializer",
    "BackendUpdateSerializer",
    "ProbeSerializer",
    "ResultSerializer",
    "RunDetailSerializer",
    "RunSerializer",
    "RunStartSerializer",
    "SampleSerializer",
    "SampleSetDetailSerializer",
    "SampleSetImportSerializer",
    "SampleSetSerializer",
]
