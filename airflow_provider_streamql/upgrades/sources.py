"""Source changes: what ``CREATE OR REPLACE STREAM|TABLE s (...)`` of a declared source
may change, as findings of a :class:`.report.Report`.

A declared source's records are already on disk, and every query reading it was planned
with its columns. So columns may be appended (a query keeps reading the columns it was
planned with) and widened (:data:`WIDENINGS`: every value of the old type reads the same
under the new one; each reader gets a new version, checked by the planner like any
``CREATE OR REPLACE``); removing, retyping, reordering or re-keying a column, and changing
a WITH property, are REJECTED. The planner's apply path and the validator both take their
verdict from :func:`source_findings`, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..language.types import SqlType
from .findings import Code, Finding, Rule, UpgradeKind, Verdict, findings, worst
from .report import Report

# a declared column type -> the types CREATE OR REPLACE may widen it to (every value of the
# old type reads the same under the new one)
WIDENINGS = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"),
    "SMALLINT": ("INT", "BIGINT", "FLOAT", "DOUBLE"),
    "INT": ("BIGINT", "DOUBLE"),
    "FLOAT": ("DOUBLE",),
}

REDECLARE = "to change it, TERMINATE the queries reading the source, DROP it and declare it again"


def widenings() -> str:
    return ", ".join(f"{old} to {'/'.join(new)}" for old, new in WIDENINGS.items())


def widens(old_type: SqlType, new_type: SqlType) -> bool:
    return new_type.spark() in WIDENINGS.get(old_type.spark(), ())


class Change:
    """The two declarations of one source, with the ids of the queries reading it."""

    def __init__(self, name: str, old_columns, new_columns, old_properties, new_properties, readers: Sequence[str]):
        self.name = name
        self.old, self.new = list(old_columns), list(new_columns)
        self.old_properties, self.new_properties = dict(old_properties), dict(new_properties)
        self.readers = list(readers)
        self.old_by = {c.name.lower(): c for c in self.old}
        self.new_by = {c.name.lower(): c for c in self.new}

    @property
    def reading(self) -> str:
        return (
            f"queries reading {self.name}: {', '.join(self.readers)}" if self.readers else f"no query reads {self.name}"
        )

    @property
    def removed(self) -> list:
        return [c for c in self.old if c.name.lower() not in self.new_by]

    @property
    def added(self) -> list:
        return [c for c in self.new if c.name.lower() not in self.old_by]

    def kept(self) -> list[tuple[Any, Any]]:
        return [(c, self.new_by[c.name.lower()]) for c in self.old if c.name.lower() in self.new_by]


def column_removed(ch: Change) -> list[str]:
    return [
        f"column {c.name} {c.type} removed: records already in {ch.name} hold it ({ch.reading}); {REDECLARE}"
        for c in ch.removed
    ]


def column_type_changed(ch: Change) -> list[str]:
    return [
        f"column {was.name} {was.type} -> {now.type} is not a widening ({widenings()}): records "
        f"already written may not read as {now.type} ({ch.reading}); {REDECLARE}"
        for was, now in ch.kept()
        if was.type != now.type and not widens(was.type, now.type)
    ]


def key_changed(ch: Change) -> list[str]:
    found = [
        f"column {was.name} {'is no longer' if was.key else 'becomes'} a key column: the records "
        f"of {ch.name} are keyed as declared ({ch.reading}); {REDECLARE}"
        for was, now in ch.kept()
        if was.key != now.key
    ]
    found += [
        f"key column {c.name} added: records already in {ch.name} have no value for it; {REDECLARE}"
        for c in ch.added
        if c.key
    ]
    return found


def columns_reordered(ch: Change) -> list[str]:
    if ch.removed:
        return []  # the removal is the finding
    prefix = [c.name.lower() for c in ch.new[: len(ch.old)]]
    if prefix == [c.name.lower() for c in ch.old]:
        return []
    return [
        f"columns ({', '.join(c.name for c in ch.new)}) are not ({', '.join(c.name for c in ch.old)}) "
        f"followed by new ones: records are read by position (CSV) and the readers were planned "
        f"with the old order ({ch.reading}); columns may only be appended at the end"
    ]


def properties_changed(ch: Change) -> list[str]:
    changed = {k: v for k, v in ch.new_properties.items() if ch.old_properties.get(k) != v}
    if not changed:
        return []  # properties left out keep their values
    shown = ", ".join(f"{k}={ch.old_properties.get(k)!r} -> {v!r}" for k, v in changed.items())
    return [f"WITH properties changed ({shown}): where and how records are read is fixed; {REDECLARE}"]


def column_widened(ch: Change) -> list[str]:
    widened = [(was, now) for was, now in ch.kept() if was.type != now.type and widens(was.type, now.type)]
    if not widened:
        return []
    what = ", ".join(f"{ch.name}.{was.name} {was.type} -> {now.type}" for was, now in widened)
    then = f"each gets a new version reading the wider type ({ch.reading})" if ch.readers else ch.reading
    return [f"{what}: every record reads the same under the wider type; {then}"]


def column_appended(ch: Change) -> list[str]:
    added = [c for c in ch.added if not c.key]
    if not added or columns_reordered(ch):
        return []
    shown = ", ".join(f"{c.name} {c.type}" for c in added)
    then = (
        f"queries reading {ch.name} keep reading the columns they were planned with "
        f"({', '.join(ch.readers)}); CREATE OR REPLACE one to read the new column"
        if ch.readers
        else ch.reading
    )
    return [f"{shown} appended: earlier records read it as NULL; {then}"]


#: what a source's new declaration may change, one rule per row (as the query rules are)
RULES: tuple[Rule[Change], ...] = (
    Rule(Code.SOURCE_COLUMN_APPENDED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.IN_PLACE, column_appended),
    Rule(Code.SOURCE_COLUMN_WIDENED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.IN_PLACE, column_widened),
    Rule(Code.SOURCE_COLUMN_REMOVED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, column_removed),
    Rule(
        Code.SOURCE_COLUMN_TYPE_CHANGED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, column_type_changed
    ),
    Rule(Code.SOURCE_COLUMNS_REORDERED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, columns_reordered),
    Rule(Code.SOURCE_KEY_CHANGED, "columns", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, key_changed),
    Rule(Code.SOURCE_PROPERTIES_CHANGED, "WITH", UpgradeKind.UNSUPPORTED, Verdict.REJECTED, properties_changed),
)


def source_findings(change: Change) -> list[Finding]:
    """One finding per difference between the two declarations; ``SOURCE_UNCHANGED`` if none."""
    return findings(RULES, change) or [
        Finding(
            Code.SOURCE_UNCHANGED,
            "columns",
            UpgradeKind.TRANSPARENT,
            Verdict.IN_PLACE,
            f"{change.name} is declared as it is",
        )
    ]


def source_report(change: Change, findings: list[Finding]) -> Report:
    """The validator's report for a source change (``source`` set, no query)."""
    kinds = sorted({f.kind for f in findings}, key=list(UpgradeKind).index)
    return Report(None, worst(findings), [], [], kinds, list(findings), source=change.name)
