"""A persistent query's rate limits: how much new input one micro-batch may take, per source
kind (RisingWave's per-source rate limit; Spark's ``maxOffsetsPerTrigger`` for Kafka and
``maxFilesPerTrigger`` for files). Set with ``WITH (...)`` on CREATE or ``ALTER QUERY <id>
SET ...`` and recorded in the query's settings, as whole numbers above 0: 0 would stop the
query reading, which PAUSE does (RisingWave's ``source_rate_limit = 0`` pauses)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the largest rate limit taken (Spark reads it as a Java long; a batch of more is no limit)
MAX_RATE = 2**31 - 1


class RateLimit(enum.StrEnum):
    """A rate limit's name, as written and as the query's settings record it."""

    MAX_RECORDS_PER_BATCH = "max_records_per_batch"
    MAX_FILES_PER_BATCH = "max_files_per_batch"

    @property
    def kafka(self) -> bool:
        """It limits Kafka sources (else file topics)."""
        return self is RateLimit.MAX_RECORDS_PER_BATCH

    @property
    def sources(self) -> str:
        """The kind of source it limits, in words."""
        return "Kafka topics" if self.kafka else "file topics"

    @property
    def spark_option(self) -> str:
        """The reader option Spark takes it as."""
        return SPARK_OPTIONS[self]


SPARK_OPTIONS = {
    RateLimit.MAX_RECORDS_PER_BATCH: "maxOffsetsPerTrigger",
    RateLimit.MAX_FILES_PER_BATCH: "maxFilesPerTrigger",
}


def rate_limit_named(name: Any) -> RateLimit | None:
    """The rate limit ``name`` says (any case), or None."""
    return next((r for r in RateLimit if isinstance(name, str) and r.value == name.lower()), None)


def rate_problem(limit: RateLimit, value: Any) -> str | None:
    """What is wrong with ``value`` as ``limit``, or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{limit} must be a whole number of {'records' if limit.kafka else 'files'} above 0, not {value!r}"
    if value == 0:
        return f"{limit} = 0 would stop the query reading: PAUSE it instead (RESUME goes on where it stopped)"
    if not 0 < value <= MAX_RATE:
        return f"{limit} must be a whole number from 1 to {MAX_RATE}, not {value!r}"
    return None


@dataclass(frozen=True)
class RateLimits:
    """The limits a query's settings record (None: no limit, each batch takes all new input)."""

    max_records_per_batch: int | None = None
    max_files_per_batch: int | None = None

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> RateLimits:
        """The limits the catalog's record of a query's settings holds."""
        return cls(*(settings.get(limit.value) for limit in RateLimit))

    def get(self, limit: RateLimit) -> int | None:
        return getattr(self, limit.value)

    def reader_options(self, *, kafka: bool) -> dict[str, str]:
        """Spark's reader options for a Kafka source or a file topic."""
        return {
            limit.spark_option: str(value)
            for limit in RateLimit
            if limit.kafka == kafka and (value := self.get(limit)) is not None
        }

    def describe(self) -> str:
        """As DESCRIBE shows them."""
        given = [f"{limit} = {value}" for limit in RateLimit if (value := self.get(limit)) is not None]
        return ", ".join(given) or "(none: each batch reads all new input)"


#: no rate limit: each batch takes all new input (Spark's default)
NO_LIMITS = RateLimits()
