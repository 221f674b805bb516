"""The one decision every wait takes (views/endings.py ``stopped``): whether a query a wait has
not seen get there can no longer get there on its own, and why; a line per case. The waits
themselves, on a real runtime, are in test_waits.py."""
from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_streamql.catalog import BadRecord, BadRecordStatus, DesiredState, QueryState
from airflow_provider_streamql.views.endings import stopped
from airflow_provider_streamql.views.waits import QueryLook

RUNNING = QueryLook("CSAS_O_1", QueryState.RUNNING, DesiredState.RUNNING, None, 2, 2, None, None, 4, 1.0e9)
ON_RECORD = BadRecord("CSAS_O_1", "r1", 5, "O", "/t/o/part-5.json", 51, "{", "malformed JSON: {",
                      BadRecordStatus.FAILED)
HOLDING = replace(ON_RECORD, status=BadRecordStatus.PENDING)
ERROR = replace(RUNNING, state=QueryState.ERROR, error="boom")


def look(**changes) -> QueryLook:
    return replace(RUNNING, **changes)


# (what the wait sees, through retries, awaited states, the stop or None, fragments of the message)
CASES = [
    (RUNNING, False, (), None, []),
    (look(state=QueryState.STARTING, error="boom"), False, (), None, []),  # a retry starting
    (ERROR, False, (), "ERROR", ["query CSAS_O_1 is in ERROR while waiting for X: boom; ", "--through-retries"]),
    (ERROR, True, (), None, []),
    (replace(ERROR, bad_record=ON_RECORD, error="malformed JSON: {"), False, (), "ERROR",
     [": malformed JSON: { (at /t/o/part-5.json:51); every retry fails on it again: RESUME CSAS_O_1 SKIP BAD "
      "RECORDS sends it to the dead-letter stream", "on_error='PAUSE'"]),
    (replace(ERROR, skipped=True), False, (), None, []),  # its record was just skipped: it starts again past it
    (replace(ERROR, running_version=1), False, (), None, []),  # the ERROR of the version replaced
    (replace(ERROR, desired=DesiredState.PAUSED), False, (), None, []),  # the runtime pauses it next
    (look(desired=DesiredState.TERMINATED), False, (), "TERMINATED",
     ["query CSAS_O_1 was terminated while waiting for X; a terminated query does not run again"]),
    (look(desired=DesiredState.TERMINATED), True, (), "TERMINATED", []),
    (look(desired=DesiredState.TERMINATED), False, ("TERMINATED",), None, []),
    (replace(ERROR, desired=DesiredState.TERMINATED), False, ("TERMINATED",), None, []),
    (look(desired=DesiredState.PAUSED, state=QueryState.PAUSED, bad_record=HOLDING), False, (), "HELD",
     ["is held (PAUSED) at a bad record while waiting for X: malformed JSON: { (at /t/o/part-5.json:51); "
      "RESUME CSAS_O_1 SKIP BAD RECORDS"]),
    (look(desired=DesiredState.PAUSED, state=QueryState.PAUSED, bad_record=HOLDING), True, (), "HELD", []),
    (look(desired=DesiredState.PAUSED, state=QueryState.PAUSED), False, (), None, []),  # someone paused it
    (look(version=1, running_version=1, rolled_back=(2, "CAST failed")), False, (), "ROLLED_BACK",
     ["version 2 of CSAS_O_1 was rolled back while waiting for X: CAST failed; the runtime runs version 1 again"]),
    (look(version=1, running_version=1, rolled_back=(2, None)), True, (), "ROLLED_BACK", []),
]


@pytest.mark.parametrize(("seen", "through_retries", "awaited", "stop", "said"), CASES)
def test_what_stops_a_wait(seen, through_retries, awaited, stop, said):
    decided = stopped(seen, through_retries=through_retries, awaited=awaited)
    assert (decided.stop if decided else None) == stop
    for fragment in said:
        assert fragment in decided.message("X"), decided.message("X")
