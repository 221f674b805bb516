"""The CREATE OR REPLACE validator: query traits, upgrade kinds and a verdict with findings.

Pure Python: it compares the compiled shape of the running version with the new one
(:class:`airflow_provider_streamql.language.query_shape.QueryShape`), grounded in what Spark
does when a query restarts on an existing checkpoint, and stricter where Spark is silently
wrong.
"""

from .findings import Code, Finding, UpgradeKind, Verdict
from .report import Report, validate_upgrade
from .traits import TRAITS, traits_of

__all__ = ["Code", "Finding", "Report", "UpgradeKind", "Verdict", "validate_upgrade", "TRAITS", "traits_of"]
