"""Issue 17, "same input, same answer": a persistent query's output is a function of its input,
not of how the runtime cut it into micro-batches.

Every query shape of the language runs three times, over three copies of the same sources
(``ev_one``/``ev_each``/``ev_chunks``, ...), fed the same records in the same order, cut three
ways:

- ``one``: each source's records in ONE file, written before the runtime starts (a TABLE's
  file holds several changes of some keys: the last one wins). The file source lists
  every file there at a query's first trigger and has no maxFilesPerTrigger
  (runtime/connectors.py ``source_stream``), so batch 0 reads all of them; the test checks it
  (``batch_files(checkpoint, 0)`` holds every input file of the query). Once its queries
  have committed their batch at the final watermark they are paused: their output is final,
  and idle queries would only take the runtime's CPU from the other two splits.
- ``each``: one record per file, one file per round; after each round every query over that
  copy has caught up (``Engine.wait_caught_up``) before the next record is written: one
  record per micro-batch.
- ``chunks``: chunks of 1-6 records (``random.Random(17)``), a source's part of a chunk one
  file, caught up after each chunk.

"Every query over that copy has caught up" is waited for as: every query that consumes the
source just written (a stream-table join reads its table whole at each batch, so it waits on
its stream only).

The final outputs must be identical: a STREAM's rows and an EMIT FINAL table's emitted rows as
multisets, any other TABLE's latest row per key (a pull query); none may be empty.

Rules the feed follows, where Spark's semantics are batch-dependent by design:

- A stream-table join reads the table as of each micro-batch (runtime/connectors.py
  ``_JoinAsOfBatch``): every split feeds the tables completely before any stream record.
- Out-of-order records are at most 5 minutes behind their stream's greatest event time, and
  every windowed or joined shape states ``GRACE PERIOD 10 MINUTES``: nothing is late in any
  split, whatever the default grace is. The last record of each stream (01:00) moves both
  watermarks past every other window and join bound, so EMIT FINAL windows and unmatched
  outer-join rows are emitted; after the feed the test waits until each watermarked query
  has planned and committed the batch at its final watermark (the no-data batch that emits).
- Floating-point aggregates (STDDEV_SAMPLE, CORRELATION) are compared to 9 significant digits:
  their partial results merge in another order when the input is cut otherwise.
"""
from __future__ import annotations

import datetime as dt
import math
import random
import sys
import time

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.storage import topics
from airflow_provider_streamql.storage.checkpoints import (
    batch_files,
    last_committed_batch,
    last_planned_batch,
    planned_watermark_ms,
    processed_files,
)

from .conftest import RuntimeThreads
from .support import changelog, wait_until

SPLITS = ["one", "each", "chunks"]
GRACE = "GRACE PERIOD 10 MINUTES"
GRACE_MS = 10 * 60 * 1000


def at(clock: str) -> str:
    return f"2024-01-01 {clock}"


# -- the input: (source, record), in the order a producer writes them -------------------------
# tables first (stream-table joins read the table as of each batch), then the two streams
# interleaved; "ooo" marks records older than their stream's greatest event time so far
TABLE_RECORDS = [
    ("usr", ("a", "Ann", "x", 5)),
    ("lvl", ("a", 1)),
    ("usr", ("b", "Bob", "y", 3)),
    ("usr", ("c", "Cy", "x", -1)),
    ("usr", ("a", "Ann", "x", -2)),  # a stops passing `score > 0`
    ("lvl", ("b", 2)),
    ("usr", ("b", "Bobby", "x", 6)),  # b moves to group x
    ("lvl", ("b", 3)),
]
STREAM_RECORDS = [
    ("ev", ("a", 5, at("00:00:10"))),
    ("sh", ("a", "p", at("00:00:30"))),
    ("ev", ("a", 7, at("00:00:50"))),  # a's SUM 12: HAVING SUM(x) > 10 holds
    ("ev", ("c", 2, at("00:01:05"))),
    ("sh", ("b", "q", at("00:01:00"))),
    ("ev", ("b", -4, at("00:01:30"))),
    ("ev", ("a", 1, at("00:00:40"))),  # ooo
    ("ev", ("d", 6, at("00:02:10"))),
    ("sh", ("x", "s", at("00:02:00"))),  # no event x
    ("ev", ("c", 9, at("00:02:30"))),
    ("ev", ("d", 6, at("00:02:40"))),  # d's 6 again (COUNT_DISTINCT, TOPKDISTINCT)
    ("ev", ("b", 8, at("00:01:50"))),  # ooo
    ("sh", ("c", "r", at("00:03:00"))),
    ("ev", ("e", 11, at("00:05:00"))),  # no shipment e
    ("ev", ("a", -20, at("00:05:10"))),  # a's SUM falls from 13 to -7: HAVING SUM(x) > 10 no longer holds
    ("sh", ("a", "t", at("00:00:05"))),  # ooo by 3 minutes; joins a's first three events
    ("ev", ("a", 3, at("00:00:30"))),  # ooo by 4 minutes 40 seconds
    ("ev", ("z", 1, at("01:00:00"))),  # moves ev's time past every window
    ("sh", ("z", "w", at("01:00:00"))),  # and sh's
]
RECORDS = TABLE_RECORDS + STREAM_RECORDS

SOURCES = """
CREATE STREAM ev_{s} (k STRING, x INT, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM sh_{s} (k STRING, tag STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE usr_{s} (id STRING PRIMARY KEY, name STRING, grp STRING, score INT);
CREATE TABLE lvl_{s} (id STRING PRIMARY KEY, level INT);
"""
AGG = "agg"
WIN = "WINDOWSTART, WINDOWEND"
SS = f"FROM ev_{{s}} e <kind>JOIN sh_{{s}} h WITHIN 1 MINUTE {GRACE} ON e.k = h.k"

#: output name -> (kind of comparison, CREATE ... AS SELECT with {s} for the split)
#: kinds: "rows" (a STREAM: every row), "latest" (a TABLE: its latest row per key, a pull
#: query), "emitted" (EMIT FINAL: every row ever emitted, a multiset)
QUERIES = {
    "flt": ("rows", "CREATE STREAM flt_{s} AS SELECT * FROM ev_{s} WHERE x > 0"),
    "prj": ("rows", "CREATE STREAM prj_{s} AS SELECT k, x * 2 AS x2, UPPER(k) AS uk, "
                    "CAST(ts AS STRING) AS t FROM ev_{s}"),
    # every aggregate function in one query; each is compared on its own (SHAPES below)
    AGG: ("latest", "CREATE TABLE agg_{s} AS SELECT k, COUNT(*) AS n_star, COUNT(x) AS n_x, SUM(x) AS s_x, "
                    "AVG(x) AS avg_x, MIN(x) AS min_x, MAX(x) AS max_x, COUNT_DISTINCT(x) AS nd_x, "
                    "COLLECT_LIST(x) AS list_x, ARRAY_SORT(COLLECT_LIST(x)) AS sorted_list_x, "
                    "COLLECT_SET(x) AS set_x, ARRAY_SORT(COLLECT_SET(x)) AS sorted_set_x, "
                    "TOPK(x, 3) AS topk_x, TOPKDISTINCT(x, 3) AS topkd_x, STDDEV_SAMPLE(x) AS sd_x, "
                    "CORRELATION(x, x * x) AS corr_x, MIN_BY(x, ts) AS first_x, MAX_BY(x, ts) AS last_x "
                    "FROM ev_{s} GROUP BY k"),
    "hcount": ("latest", "CREATE TABLE hcount_{s} AS SELECT k, COUNT(*) AS n FROM ev_{s} GROUP BY k "
                         "HAVING COUNT(*) > 1"),
    "hsum": ("latest", "CREATE TABLE hsum_{s} AS SELECT k, SUM(x) AS total FROM ev_{s} GROUP BY k "
                       "HAVING SUM(x) > 10"),
    "tumch": ("latest", f"CREATE TABLE tumch_{{s}} AS SELECT k, COUNT(*) AS n, SUM(x) AS total, {WIN} "
                        f"FROM ev_{{s}} WINDOW TUMBLING (SIZE 1 MINUTE, {GRACE}) GROUP BY k EMIT CHANGES"),
    "tumfi": ("emitted", f"CREATE TABLE tumfi_{{s}} AS SELECT k, COUNT(*) AS n, SUM(x) AS total, {WIN} "
                         f"FROM ev_{{s}} WINDOW TUMBLING (SIZE 1 MINUTE, {GRACE}) GROUP BY k EMIT FINAL"),
    "hopch": ("latest", f"CREATE TABLE hopch_{{s}} AS SELECT k, COUNT(*) AS n, SUM(x) AS total, {WIN} "
                        f"FROM ev_{{s}} WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE, {GRACE}) "
                        f"GROUP BY k EMIT CHANGES"),
    "hopfi": ("emitted", f"CREATE TABLE hopfi_{{s}} AS SELECT k, COUNT(*) AS n, SUM(x) AS total, {WIN} "
                         f"FROM ev_{{s}} WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE, {GRACE}) "
                         f"GROUP BY k EMIT FINAL"),
    "sesfi": ("emitted", f"CREATE TABLE sesfi_{{s}} AS SELECT k, COUNT(*) AS n, SUM(x) AS total, {WIN} "
                         f"FROM ev_{{s}} WINDOW SESSION (1 MINUTE, {GRACE}) GROUP BY k EMIT FINAL"),
    "ssin": ("rows", "CREATE STREAM ssin_{s} AS SELECT e.k AS k, e.x AS x, h.tag AS tag " + SS.replace("<kind>", "")),
    "ssle": ("rows", "CREATE STREAM ssle_{s} AS SELECT e.k AS k, e.x AS x, h.tag AS tag " + SS.replace("<kind>", "LEFT ")),
    "ssri": ("rows", "CREATE STREAM ssri_{s} AS SELECT h.k AS k, e.x AS x, h.tag AS tag " + SS.replace("<kind>", "RIGHT ")),
    "ssfu": ("rows", "CREATE STREAM ssfu_{s} AS SELECT e.k AS ek, h.k AS hk, e.x AS x, h.tag AS tag "
                     + SS.replace("<kind>", "FULL OUTER ")),
    "ssagg": ("latest", "CREATE TABLE ssagg_{s} AS SELECT e.k AS k, COUNT(*) AS n, SUM(e.x) AS total "
                        + SS.replace("<kind>", "") + " GROUP BY e.k"),
    "stin": ("rows", "CREATE STREAM stin_{s} AS SELECT e.k AS k, e.x AS x, u.name AS name, u.score AS score "
                     "FROM ev_{s} e JOIN usr_{s} u ON e.k = u.id"),
    "stle": ("rows", "CREATE STREAM stle_{s} AS SELECT e.k AS k, e.x AS x, u.name AS name, u.score AS score "
                     "FROM ev_{s} e LEFT JOIN usr_{s} u ON e.k = u.id"),
    "ttin": ("latest", "CREATE TABLE ttin_{s} AS SELECT u.id AS id, u.name AS name, l.level AS level "
                       "FROM usr_{s} u JOIN lvl_{s} l ON u.id = l.id"),
    "ttle": ("latest", "CREATE TABLE ttle_{s} AS SELECT u.id AS id, u.name AS name, l.level AS level "
                       "FROM usr_{s} u LEFT JOIN lvl_{s} l ON u.id = l.id"),
    "tflt": ("latest", "CREATE TABLE tflt_{s} AS SELECT id, name, score * 10 AS score10 FROM usr_{s} "
                       "WHERE score > 0"),
    "tagg": ("latest", "CREATE TABLE tagg_{s} AS SELECT grp, COUNT(*) AS n, SUM(score) AS total "
                       "FROM usr_{s} GROUP BY grp"),
}

# -- the shapes: (id, output, columns compared (None: all)) ------------------------------------
AGG_COLUMNS = {
    "COUNT(*)": "n_star", "COUNT(x)": "n_x", "SUM": "s_x", "AVG": "avg_x", "MIN": "min_x", "MAX": "max_x",
    # COLLECT_LIST/SET have no defined order across micro-batches (docs/language.md): sorted
    "COUNT_DISTINCT": "nd_x", "ARRAY_SORT(COLLECT_LIST)": "sorted_list_x",
    "ARRAY_SORT(COLLECT_SET)": "sorted_set_x", "TOPK": "topk_x",
    "TOPKDISTINCT": "topkd_x", "STDDEV_SAMPLE": "sd_x", "CORRELATION": "corr_x",
    "MIN_BY(x, ts)": "first_x", "MAX_BY(x, ts)": "last_x",
}
SHAPES = [
    ("filter", "flt", None), ("projection", "prj", None),
    *[(f"aggregate {name}", AGG, ["k", column]) for name, column in AGG_COLUMNS.items()],
    ("HAVING COUNT(*) > 1", "hcount", None), ("HAVING SUM(x) > 10", "hsum", None),
    ("TUMBLING EMIT CHANGES", "tumch", None), ("TUMBLING EMIT FINAL", "tumfi", None),
    ("HOPPING EMIT CHANGES", "hopch", None), ("HOPPING EMIT FINAL", "hopfi", None),
    ("SESSION EMIT FINAL", "sesfi", None),
    ("stream-stream INNER JOIN", "ssin", None), ("stream-stream LEFT JOIN", "ssle", None),
    ("stream-stream RIGHT JOIN", "ssri", None), ("stream-stream FULL OUTER JOIN", "ssfu", None),
    ("COUNT over a stream-stream join", "ssagg", None),
    ("stream-table INNER JOIN", "stin", None), ("stream-table LEFT JOIN", "stle", None),
    ("table-table INNER JOIN", "ttin", None), ("table-table LEFT JOIN", "ttle", None),
    ("table filter and projection", "tflt", None), ("table aggregation", "tagg", None),
]


# -- feeding ------------------------------------------------------------------------------------
def _record(src, values) -> dict:
    return dict(zip([c.name for c in src.columns], values, strict=True))


def _write(engine, split: str, records) -> None:
    """``records`` [(source, values)]: each source's as one file, in their order."""
    by_source: dict[str, list] = {}
    for name, values in records:
        by_source.setdefault(name, []).append(values)
    for name, rows in by_source.items():
        src = engine.catalog.source(f"{name}_{split}".upper())
        topics.append(src.path, src.format, src.columns, [_record(src, r) for r in rows])


def _chunks(records, rng: random.Random):
    """``records`` cut in chunks of 1-6 (a chunk never spans tables and streams: see above)."""
    out, i = [], 0
    while i < len(records):
        n = rng.randint(1, 6)
        out.append(records[i:i + n])
        i += n
    return out


def _catch_up(engine, ids) -> None:
    for query_id in ids:
        engine.wait_caught_up(query_id, timeout=120, poll=0.05)


def _final_watermark_ms(query) -> int | None:
    """The watermark a watermarked query ends at: the least over its streams of (greatest
    event time - grace); None for a query with no watermark."""
    marks = query.plan.watermarks
    if not marks:
        return None
    epoch = dt.datetime(1970, 1, 1)
    ends = []
    for name, (_column, grace) in marks.items():
        stream = name.rsplit("_", 1)[0].lower()
        last = max(dt.datetime.fromisoformat(v[-1]) for s, v in STREAM_RECORDS if s == stream)
        ends.append(int((last - epoch).total_seconds() * 1000 - grace * 1000))
    return min(ends)


def _settle(queries) -> None:
    """Wait for each watermarked query's batch at its final watermark (it emits EMIT FINAL
    windows and unmatched outer-join rows)."""
    for query in queries:
        final = _final_watermark_ms(query)
        if final is not None:
            wait_until(lambda q=query, f=final: planned_watermark_ms(q.checkpoint) == f
                       and last_committed_batch(q.checkpoint) == last_planned_batch(q.checkpoint),
                       timeout=120, what=f"{query.id} to commit its batch at watermark {final}")


@pytest.fixture(scope="module")
def fed(spark, tmp_path_factory):
    """One catalog and one runtime; every query of every split created, fed and settled."""
    base = tmp_path_factory.mktemp("batch-split")
    home = base / "home"
    home.mkdir()
    engine = Engine(f"sqlite:///{base}/catalog.db", home=str(home), issuer="test")
    engine.execute("".join(SOURCES.format(s=s) for s in SPLITS))
    engine.execute(";".join(sql.format(s=s) for s in SPLITS for _kind, sql in QUERIES.values()))
    queries = {q.sink: q for q in engine.catalog.queries()}
    by_split = {s: [q.id for q in queries.values() if q.sink.endswith(f"_{s.upper()}")] for s in SPLITS}

    # one: everything in place before the runtime starts
    _write(engine, "one", RECORDS)
    threads = RuntimeThreads(spark)
    started = time.monotonic()
    threads.start(engine)
    try:
        for query_id in (i for ids in by_split.values() for i in ids):
            engine.wait_for_state(query_id, "RUNNING", timeout=180)
        print(f"\nstarted in {time.monotonic() - started:.1f}s", file=sys.stderr)
        _catch_up(engine, by_split["one"])
        # the one split is done once settled: paused, its output stays as committed, and its
        # 21 queries stop listing their sources while the other splits are fed (idle queries
        # cost the runtime about a third of its CPU here)
        _settle([q for q in queries.values() if q.id in by_split["one"]])
        for query_id in by_split["one"]:
            engine.control("PAUSE", query_id)
        for query_id in by_split["one"]:
            engine.wait_for_state(query_id, "PAUSED", timeout=120)

        # each and chunks in lockstep: round i writes record i to each, and the chunk that
        # ends at record i to chunks; then both copies catch up
        chunks = _chunks(TABLE_RECORDS, random.Random(17))
        chunks += _chunks(STREAM_RECORDS, random.Random(17 * 17))
        ends, n = {}, 0
        for chunk in chunks:
            n += len(chunk)
            ends[n - 1] = chunk
        fed_at = time.monotonic()
        def readers(split, records):  # the queries that consume these records' sources
            names = {f"{name}_{split}".upper() for name, _ in records}
            return [q.id for q in queries.values() if q.id in by_split[split]
                    and names & (set(q.sources) - set(q.plan.static_tables))]

        for i, record in enumerate(RECORDS):
            _write(engine, "each", [record])
            waiting = readers("each", [record])
            if i in ends:
                _write(engine, "chunks", ends[i])
                waiting += readers("chunks", ends[i])
            _catch_up(engine, waiting)
        print(f"fed each and chunks in {time.monotonic() - fed_at:.1f}s ({len(chunks)} chunks)", file=sys.stderr)
        settle = time.monotonic()
        _settle([q for q in queries.values() if q.id not in by_split["one"]])
        print(f"settled in {time.monotonic() - settle:.1f}s", file=sys.stderr)
        yield engine, queries
    finally:
        threads.stop_all()
        engine.close()


def _normal(value):
    if isinstance(value, float):
        return float(f"{value:.9g}") if math.isfinite(value) else repr(value)
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    return value


def _rows(engine, kind: str, name: str, columns) -> list:
    if kind == "emitted":
        rows = changelog(engine, name)
        rows = [tuple(r[c] for c in (columns or r.keys())) for r in rows]
    else:
        result = engine.execute(f"SELECT {', '.join(columns) if columns else '*'} FROM {name}")[0]
        rows = [tuple(r) for r in result.rows]
    return sorted((tuple(_normal(v) for v in r) for r in rows), key=repr)


def test_one_file_is_one_micro_batch(fed):
    """What the ``one`` split relies on: batch 0 of each of its queries read every file."""
    engine, queries = fed
    for query in queries.values():
        if query.sink.endswith("_ONE"):
            processed = processed_files(query.checkpoint)
            assert processed and batch_files(query.checkpoint, 0) == processed, query.id


@pytest.mark.parametrize("output, columns", [pytest.param(o, c, id=i) for i, o, c in SHAPES])
def test_same_input_same_answer(fed, output, columns):
    engine, _queries = fed
    kind = QUERIES[output][0]
    answers = {s: _rows(engine, kind, f"{output}_{s}", columns) for s in SPLITS}
    assert answers["one"], f"{output}_one is empty"
    assert answers["each"] == answers["one"]
    assert answers["chunks"] == answers["one"]
