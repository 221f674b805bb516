"""The chaos soak's checker and its short run (issue 34): bench/chaos.py with a fixed seed, a
kill -9, a frozen lease holder and a catalog restart, every output checked."""

from __future__ import annotations

import glob
import os

import pytest

from bench import chaos
from bench import chaos_checks as checks

ORDERS = [checks.Order(i) for i in range(1, 11)]
BIG = sorted(checks.expected(ORDERS).streams["big"])  # ids 50..: none in 1..10
ALL = [o.id for o in ORDERS]

# a history of what a stream sink holds -> the checker's verdict, and what it names
STREAMS = [
    (ALL, True, "10 records"),
    (ALL[:-1], False, "lost 10"),
    (ALL + [3], False, "doubled 3 x2"),
    (ALL[1:] + [7, 7, 7], False, "lost 1; doubled 7 x4"),
    (ALL + [99], False, "not expected 99"),
    (list(reversed(ALL)), True, "10 records"),  # order is not a loss
]


@pytest.mark.parametrize("written, ok, detail", STREAMS)
def test_the_checker_names_lost_and_doubled_records(written, ok, detail):
    verdict = checks.exactly_once("enriched", set(ALL), written)
    assert (verdict.ok, verdict.detail) == (ok, detail)


TOTALS = checks.expected(ORDERS).tables["totals"]
TABLES = [
    (TOTALS, True),
    ({**TOTALS, "u1": (3, 7.0)}, False),  # a record counted twice
    ({k: v for k, v in TOTALS.items() if k != "u0"}, False),  # a key lost
    ({**TOTALS, "u9": (1, 1.0)}, False),  # a key from nowhere
]


@pytest.mark.parametrize("held, ok", TABLES)
def test_the_checker_compares_tables_with_the_pipeline_without_faults(held, ok):
    assert checks.equal_table("totals", TOTALS, held).ok is ok


def test_the_expected_pipeline_is_computed_from_the_inputs():
    want = checks.expected(checks.Order(i) for i in range(1, 121))
    assert want.tables["totals"]["u1"] == (24, sum(float(i % 100) for i in range(1, 121) if i % 5 == 1))
    assert want.tables["per_minute"][("u0", "2024-01-01 00:01")] == (12,)  # ids 60..115 step 5
    assert want.streams["big_doubled"] == {i for i in range(1, 121) if i % 100 >= 50}


AT_END = checks.QueryAtEnd("CSAS_BIG_1", "RUNNING", "RUNNING", 3, 3, True, ("REPLACED", "ROLLED_BACK", "ACTIVE"))
QUERIES = [
    (AT_END, True),
    (checks.dataclasses.replace(AT_END, shown="UNASSIGNED"), False),
    (checks.dataclasses.replace(AT_END, holder_alive=False), False),
    (checks.dataclasses.replace(AT_END, running_version=2), False),
    (checks.dataclasses.replace(AT_END, outcomes=("ACTIVE", "ROLLED_BACK", "ACTIVE")), False),
    (checks.dataclasses.replace(AT_END, outcomes=("REPLACED", "ROLLED_BACK", None)), False),
]


@pytest.mark.parametrize("query, ok", QUERIES)
def test_the_checker_explains_each_query_by_the_catalog(query, ok):
    assert checks.explained(query).ok is ok


@pytest.mark.parametrize(
    "issued, logged, ok",
    [
        (["PAUSE ALL", "RESUME ALL"], ["PAUSE ALL", "RESUME ALL"], True),
        (["PAUSE ALL", "RESUME ALL"], ["PAUSE ALL"], False),  # a statement lost
        (["PAUSE ALL"], ["PAUSE ALL", "PAUSE ALL"], False),  # logged twice
        (["PAUSE ALL", "RESUME ALL"], ["RESUME ALL", "PAUSE ALL"], False),  # out of order
    ],
)
def test_the_checker_matches_the_command_log_with_what_was_issued(issued, logged, ok):
    assert checks.command_log(issued, logged).ok is ok


@pytest.mark.slow
def test_a_short_soak_loses_and_doubles_nothing(tmp_path):
    """Two runtime processes on a PostgreSQL catalog through a kill -9, a SIGSTOP of the lease
    holder past its lease and a catalog restart: every check of the soak passes."""
    settings = chaos.Settings(
        duration=0,
        seed=34,
        faults=("kill", "freeze", "catalog"),
        rate=10,
        lease_ttl=6,
        gap=(1, 3),
        recover_timeout=120,
        root=str(tmp_path / "soak"),
    )
    summary = chaos.Soak(settings).run()
    assert summary["passed"], chaos.report(summary) + "\n" + _runtime_events(settings.root)
    assert {f["kind"] for f in summary["history"]} == {"kill", "freeze", "catalog"}


def _runtime_events(root: str) -> str:
    """What the runtimes logged of their queries' states and failures, but the catalog outage's
    retries (the logs go with tmp_path)."""
    lines = []
    for log in sorted(glob.glob(os.path.join(root, "runtime-*.log"))):
        with open(log, errors="replace") as f:
            lines += [
                f"{os.path.basename(log)}: {line.rstrip()[-400:]}"
                for line in f
                if " streamql.runtime " in line and "failed; retrying" not in line
            ]
    return "\n".join(lines[-80:])
