"""The catalog: durable control plane (sources, queries, command log, runtimes, leases)."""

from .migrations import LATEST, current_version, migrate
from .model import (
    DESIRED_STATES,
    ERROR_POLICIES,
    OBSERVED_STATES,
    BadRecord,
    CheckpointSnapshot,
    Progress,
    QueryInfo,
    Snapshot,
    SourceInfo,
)
from .states import (
    ACTIVE_STATES,
    BAD_RECORD_STATUSES,
    BadRecordStatus,
    DesiredState,
    OnError,
    ProcessingGuarantee,
    QueryState,
)
from .store import Catalog
from .urls import DEFAULT_PIPELINE, default_home, default_pipeline, default_url, safe_url

__all__ = [
    "Catalog",
    "BadRecordStatus",
    "DesiredState",
    "OnError",
    "ProcessingGuarantee",
    "QueryState",
    "LATEST",
    "current_version",
    "migrate",
    "default_home",
    "default_pipeline",
    "DEFAULT_PIPELINE",
    "default_url",
    "safe_url",
    "ACTIVE_STATES",
    "DESIRED_STATES",
    "ERROR_POLICIES",
    "OBSERVED_STATES",
    "Progress",
    "QueryInfo",
    "Snapshot",
    "SourceInfo",
    "BadRecord",
    "CheckpointSnapshot",
    "BAD_RECORD_STATUSES",
]
