"""The checker of the chaos soak (bench/chaos.py): the pipeline computed in plain Python from
the records fed, and the verdicts that compare it with what the sinks, the queries and the
command log hold at the end. Pure functions of plain values: a test feeds it a history with a
lost or a doubled record and sees it say so (tests/test_chaos.py)."""

from __future__ import annotations

import collections
import dataclasses
import datetime
from collections.abc import Iterable, Mapping

#: event time of record 0; record ``id`` happened ``id`` seconds later
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
USERS = ("u0", "u1", "u2", "u3", "u4")
REGIONS = {"u0": "north", "u1": "south", "u2": "east", "u3": "west", "u4": "north"}
#: the filter's threshold: half of the records pass it
BIG = 50.0


@dataclasses.dataclass(frozen=True)
class Order:
    """One input record: its id makes its loss or a second copy visible in every output."""

    id: int

    @property
    def user(self) -> str:
        return USERS[self.id % len(USERS)]

    @property
    def amount(self) -> float:
        return float(self.id % 100)  # whole numbers: sums are exact in any order

    @property
    def ts(self) -> datetime.datetime:
        return EPOCH + datetime.timedelta(seconds=self.id)

    def row(self) -> dict[str, object]:
        return {
            "id": self.id,
            "user": self.user,
            "amount": self.amount,
            "ts": self.ts.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        }


def minute(ts: object) -> str:
    """A window's start as 'YYYY-MM-DD HH:MM', from a datetime or the text a pull query gives."""
    return str(ts).replace("T", " ")[:16]


@dataclasses.dataclass(frozen=True)
class Expected:
    """What each sink of the pipeline holds after the records, computed without Spark."""

    streams: dict[str, set[int]]  # stream -> the ids each must hold exactly once
    tables: dict[str, dict[object, tuple]]  # table -> key -> rest of the row


def expected(orders: Iterable[Order]) -> Expected:
    orders = list(orders)
    big = {o.id for o in orders if o.amount >= BIG}
    totals: dict[object, tuple] = {}
    per_minute: collections.Counter = collections.Counter()
    for user in USERS:
        mine = [o for o in orders if o.user == user]
        if mine:
            totals[user] = (len(mine), sum(o.amount for o in mine))
    for o in orders:
        per_minute[(o.user, minute(o.ts))] += 1
    return Expected(
        streams={"big": big, "big_doubled": big, "enriched": {o.id for o in orders}},
        tables={"totals": totals, "per_minute": {k: (n,) for k, n in per_minute.items()}},
    )


@dataclasses.dataclass(frozen=True)
class Verdict:
    check: str
    ok: bool
    detail: str = ""


def _some(values: Iterable[object], n: int = 10) -> str:
    values = sorted(values, key=lambda v: (len(str(v)), str(v)))
    more = f" and {len(values) - n} more" if len(values) > n else ""
    return ", ".join(map(str, values[:n])) + more


def exactly_once(sink: str, wanted: set[int], written: Iterable[int]) -> Verdict:
    """Every wanted id once in ``written``: names the lost, the doubled and the unexpected."""
    counts = collections.Counter(written)
    lost = wanted - set(counts)
    doubled = {f"{i} x{n}" for i, n in counts.items() if n > 1}
    extra = set(counts) - wanted
    problems = [
        f"{what} {_some(ids)}" for what, ids in (("lost", lost), ("doubled", doubled), ("not expected", extra)) if ids
    ]
    return Verdict(f"{sink}: each record exactly once", not problems, "; ".join(problems) or f"{len(wanted)} records")


def equal_table(table: str, wanted: Mapping[object, tuple], held: Mapping[object, tuple]) -> Verdict:
    """The table equals the one computed from the inputs: names each key that differs."""
    keys = set(wanted) | set(held)
    wrong = {k: (held.get(k), wanted.get(k)) for k in keys if held.get(k) != wanted.get(k)}
    detail = "; ".join(f"{k!r}: holds {h!r}, expected {w!r}" for k, (h, w) in sorted(wrong.items(), key=repr)[:10])
    return Verdict(f"{table}: equals the pipeline without faults", not wrong, detail or f"{len(wanted)} rows")


@dataclasses.dataclass(frozen=True)
class QueryAtEnd:
    """What the catalog says of a query once the faults stopped and everything caught up."""

    query_id: str
    desired: str
    shown: str  # observed state as SHOW QUERIES shows it
    version: int
    running_version: int | None
    holder_alive: bool  # its lease is held by a runtime that heartbeats
    outcomes: tuple[str | None, ...]  # each version's outcome, oldest first
    error: str | None = None  # the error the catalog holds for it, named when it is not where it should be


#: the outcomes a version may be left with (None: the one in its readiness window)
OUTCOMES = {"ACTIVE", "REPLACED", "ROLLED_BACK"}


def explained(query: QueryAtEnd) -> Verdict:
    """The query is where its desired state says, on its current version, run by a live
    runtime, and each of its versions has an outcome the catalog gives versions."""
    problems = []
    if query.shown != query.desired:
        problems.append(
            f"shown {query.shown}, desired {query.desired}" + (f" (error: {query.error})" if query.error else "")
        )
    if query.desired == "RUNNING" and not query.holder_alive:
        problems.append("no live runtime holds its lease")
    if query.running_version != query.version:
        problems.append(f"runs version {query.running_version}, current is {query.version}")
    if set(query.outcomes) - OUTCOMES or query.outcomes.count("ACTIVE") != 1:
        problems.append(f"version outcomes {query.outcomes!r}")
    return Verdict(
        f"{query.query_id}: state the catalog explains",
        not problems,
        "; ".join(problems) or f"{query.shown} on version {query.version}",
    )


def command_log(issued: list[str], logged: list[str]) -> Verdict:
    """The command log holds the statements issued, in order, each once (and nothing else
    under the harness's name)."""
    if issued == logged:
        return Verdict("command log matches what was issued", True, f"{len(issued)} statements")
    at = next(
        (i for i, (a, b) in enumerate(zip(issued, logged, strict=False)) if a != b), min(len(issued), len(logged))
    )
    return Verdict(
        "command log matches what was issued",
        False,
        f"{len(issued)} issued, {len(logged)} logged; first difference at {at}: "
        f"issued {issued[at : at + 1]!r}, logged {logged[at : at + 1]!r}",
    )
