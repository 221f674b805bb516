"""What the validator finds: a finding's stable code, the upgrade kind it is and the verdict it
forces, as closed sets (enums whose members are their text, so reports, XCom and the CLI
show the same words); and a rule, one row of a table of them, that yields findings."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar


class Verdict(enum.StrEnum):
    """What the validator says of an upgrade, in rising severity."""

    IN_PLACE = "IN_PLACE"  # same query ID and checkpoint, version N+1
    REPLACING_REQUIRED = "REPLACING_REQUIRED"  # a new checkpoint (from earliest or latest)
    REJECTED = "REJECTED"


class UpgradeKind(enum.StrEnum):
    """ksqlDB's upgrade kinds (KLIP-28)."""

    TRANSPARENT = "transparent"
    DATA_SELECTION = "data selection"
    SCHEMA_EVOLUTION = "schema evolution"
    SOURCE_MODIFYING = "source modifying"
    TOPOLOGY = "topology"
    SCALING = "scaling"
    UNSUPPORTED = "unsupported"


class Code(enum.StrEnum):
    """Every finding's stable code (docs/upgrades.md lists them with their meaning)."""

    # a query's new version (upgrades/rules.py)
    UNCHANGED = "UNCHANGED"
    SINK_CHANGED = "SINK_CHANGED"
    QUERY_KIND_CHANGED = "QUERY_KIND_CHANGED"
    COLUMN_REMOVED = "COLUMN_REMOVED"
    COLUMN_TYPE_CHANGED = "COLUMN_TYPE_CHANGED"
    COLUMNS_REORDERED = "COLUMNS_REORDERED"
    KEY_CHANGED = "KEY_CHANGED"
    STATE_SCHEMA_INCOMPATIBLE = "STATE_SCHEMA_INCOMPATIBLE"
    SUBQUERY = "SUBQUERY"
    UNSUPPORTED_CHANGE = "UNSUPPORTED_CHANGE"
    SOURCES_CHANGED = "SOURCES_CHANGED"
    SOURCE_ADDED = "SOURCE_ADDED"
    SOURCE_REMOVED = "SOURCE_REMOVED"
    BRANCH_CHANGED = "BRANCH_CHANGED"
    GROUP_BY_CHANGED = "GROUP_BY_CHANGED"
    AGGREGATES_CHANGED = "AGGREGATES_CHANGED"
    WINDOW_CHANGED = "WINDOW_CHANGED"
    EMIT_CHANGED = "EMIT_CHANGED"
    STREAM_JOIN_CHANGED = "STREAM_JOIN_CHANGED"
    TABLE_JOIN_CHANGED = "TABLE_JOIN_CHANGED"
    KAFKA_TOPIC_CHANGED = "KAFKA_TOPIC_CHANGED"
    COLUMN_APPENDED = "COLUMN_APPENDED"
    FILTER_CHANGED = "FILTER_CHANGED"
    HAVING_CHANGED = "HAVING_CHANGED"
    GRACE_CHANGED = "GRACE_CHANGED"
    PROJECTION_CHANGED = "PROJECTION_CHANGED"
    ERROR_POLICY_CHANGED = "ERROR_POLICY_CHANGED"
    RATE_LIMIT_CHANGED = "RATE_LIMIT_CHANGED"
    EXPECTATION_CHANGED = "EXPECTATION_CHANGED"
    # found by the planner and the dry run beside the rules
    MULTIPLE_WRITERS = "MULTIPLE_WRITERS"
    SPARK_REFUSED = "SPARK_REFUSED"
    # a declared source's new declaration (upgrades/sources.py) and its readers
    SOURCE_UNCHANGED = "SOURCE_UNCHANGED"
    SOURCE_COLUMN_APPENDED = "SOURCE_COLUMN_APPENDED"
    SOURCE_COLUMN_WIDENED = "SOURCE_COLUMN_WIDENED"
    SOURCE_COLUMN_REMOVED = "SOURCE_COLUMN_REMOVED"
    SOURCE_COLUMN_TYPE_CHANGED = "SOURCE_COLUMN_TYPE_CHANGED"
    SOURCE_COLUMNS_REORDERED = "SOURCE_COLUMNS_REORDERED"
    SOURCE_KEY_CHANGED = "SOURCE_KEY_CHANGED"
    SOURCE_PROPERTIES_CHANGED = "SOURCE_PROPERTIES_CHANGED"
    SOURCE_READER_UPGRADED = "SOURCE_READER_UPGRADED"
    SOURCE_READER_BLOCKS = "SOURCE_READER_BLOCKS"


@dataclass(frozen=True)
class Finding:
    """One difference between the versions: a stable ``code``, the ``clause`` it concerns,
    the upgrade ``kind`` it is, the ``verdict`` it forces and a plain sentence."""

    code: Code
    clause: str
    kind: UpgradeKind
    verdict: Verdict
    message: str


def worst(findings: Iterable[Finding]) -> Verdict:
    """The most severe verdict of ``findings``."""
    return max((f.verdict for f in findings), key=list(Verdict).index)


Subject = TypeVar("Subject")


@dataclass(frozen=True)
class Rule(Generic[Subject]):
    """One row of a rule table: what it finds, and its check over the subject (two versions
    of a query, two declarations of a source), one plain sentence per problem."""

    code: Code
    clause: str
    kind: UpgradeKind
    verdict: Verdict
    check: Callable[[Subject], Iterable[str]]


def findings(rules: Sequence[Rule[Subject]], subject: Subject) -> list[Finding]:
    """Every finding of ``rules`` over ``subject``, in the table's order."""
    return [
        Finding(rule.code, rule.clause, rule.kind, rule.verdict, message)
        for rule in rules
        for message in rule.check(subject)
    ]
