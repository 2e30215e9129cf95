from ledger.models.contacts import Contact
from ledger.models.cost import PriceSheet
from ledger.models.events import Event
from ledger.models.evidence import LoadTestReport, LoadTestRequestData, RequestLevel
from ledger.models.gateway import GatewayPolicy
from ledger.models.preferences import UserPreference
from ledger.models.registry import (
    Capability,
    License,
    LicenseAcceptance,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    TaskType,
    Team,
)
from ledger.models.run_evidence import RunBreakdown, RunSummary
from ledger.models.traces import ModelCallSpan

__all__ = [
    "Capability",
    "Contact",
    "Event",
    "GatewayPolicy",
    "License",
    "LicenseAcceptance",
    "LoadTestReport",
    "LoadTestRequestData",
    "ModelAsset",
    "ModelCallSpan",
    "PriceSheet",
    "RequestLevel",
    "Revision",
    "RunBreakdown",
    "RunSummary",
    "Runtime",
    "Service",
    "TaskType",
    "Team",
    "UserPreference",
]
