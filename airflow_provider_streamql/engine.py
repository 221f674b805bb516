"""The one door: every caller (CLI, runtime tooling, Airflow operators) goes through Engine."""
from __future__ import annotations

import getpass
import os
import time
from typing import Any, Iterable

from . import topics
from .catalog import Catalog, Progress, QueryInfo, default_home
from .checkpoints import processed_files
from .errors import NotFoundError, StateError, ValidationError, WaitTimeout
from .introspection import query_rows, shown_state
from .language import parse, parse_one
from .language.statements import CreateAsSelect
from .planner import Planner
from .results import Result
from .upgrades import Report

DEFAULT_PIPELINE = "default"


class Engine:
    """Execute StreamQL, read query state, and wait for it.

    :param catalog: catalog URL (SQLite or PostgreSQL) or an open :class:`Catalog`;
        default ``$STREAMQL_CATALOG`` or SQLite under ``home``.
    :param home: directory for file topics and checkpoints; default ``$STREAMQL_HOME``
        or ``./.streamql``.
    :param pipeline: pipeline that new queries belong to and ``ALL`` refers to.
    :param issuer: who issues statements, recorded in the command log.
    """

    def __init__(self, catalog: str | Catalog | None = None, *, home: str | None = None,
                 pipeline: str | None = None, issuer: str | None = None):
        self.home = os.path.abspath(home) if home else default_home()
        os.makedirs(self.home, exist_ok=True)
        self.catalog = catalog if isinstance(catalog, Catalog) else Catalog(catalog, home=self.home)
        self.pipeline = pipeline or os.environ.get("STREAMQL_PIPELINE", DEFAULT_PIPELINE)
        self.issuer = issuer or f"user:{getpass.getuser()}"

    def close(self) -> None:
        self.catalog.close()

    # -- statements --------------------------------------------------------------------
    def execute(self, script: str, *, pipeline: str | None = None,
                issuer: str | None = None) -> list[Result]:
        """Validate the whole script, then apply it in one catalog transaction.

        If any statement is wrong, the error names it and nothing is applied. Statements
        that write files (INSERT VALUES, DROP ... DELETE TOPIC) do so after the commit;
        pull queries read after it.
        """
        statements = parse(script)
        pipeline = pipeline or self.pipeline
        issuer = issuer or self.issuer
        with self.catalog.transaction() as conn:
            planner = self._planner(conn, pipeline)
            steps = [planner.plan(stmt) for stmt in statements]
            for stmt, step in zip(statements, steps):
                if step.write:
                    step.write(conn)
                if step.log:
                    self.catalog.log_command(conn, stmt.text.strip(), pipeline, issuer)
        for step in steps:
            if step.after_commit:
                step.after_commit(step.result)
        return [step.result for step in steps]

    def validate(self, sql: str, *, pipeline: str | None = None) -> "Report":
        """The validator's report for one ``CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT``
        of an existing query's output. Changes nothing."""
        return self._check_replace(self._create_as_select(sql, "validate"), pipeline)[1]

    def _create_as_select(self, sql: str, verb: str) -> CreateAsSelect:
        stmt = parse_one(sql)
        if not isinstance(stmt, CreateAsSelect):
            raise ValidationError(f"{verb} takes one CREATE [OR REPLACE] STREAM|TABLE ... AS "
                                  f"SELECT statement, got {type(stmt).__name__}",
                                  line=stmt.line, col=stmt.col, text=stmt.text.strip()[:120])
        return stmt

    def _planner(self, conn, pipeline: str | None) -> Planner:
        return Planner(self.catalog, conn, self.catalog.snapshot(conn), self.home,
                       pipeline or self.pipeline)

    def _check_replace(self, stmt: CreateAsSelect, pipeline: str | None):
        with self.catalog.engine.connect() as conn:
            return self._planner(conn, pipeline).check_replace(stmt)

    def dry_run(self, sql: str, spark: Any, *, pipeline: str | None = None) -> "Report":
        """:meth:`validate`, then run the new version on ``spark`` over a copy of the live
        checkpoint with a sink that writes nothing, so Spark's own checks have their say.
        A Spark refusal turns an IN_PLACE verdict into REJECTED (finding SPARK_REFUSED)."""
        from .runtime.dryrun import dry_run
        from .upgrades import Finding
        stmt = self._create_as_select(sql, "dry_run")
        _current, report, new, _sink = self._check_replace(stmt, pipeline)
        sources = {n: self.catalog.source(n) for n in new.sources}
        outcome = dry_run(spark, new, sources)
        report.spark = {"ran": outcome.error is None, "error": outcome.error,
                        "batches": outcome.batches, "input_rows": outcome.input_rows,
                        "new_input_files": outcome.new_files}
        if outcome.error is not None and report.verdict == "IN_PLACE":
            report.findings.append(Finding("SPARK_REFUSED", "query", "unsupported", "REJECTED",
                                           f"Spark refused the new version on a copy of the "
                                           f"checkpoint: {outcome.error}"))
            report.verdict = "REJECTED"
        return report

    def replace(self, sql: str, *, start_from: str, pipeline: str | None = None,
                issuer: str | None = None) -> list[Result]:
        """The replacing upgrade, for what cannot be done in place: TERMINATE the query that
        writes the statement's output, DROP that output with its data, and create it again
        reading its sources from ``start_from`` (``'earliest'``; file topics have no
        ``'latest'``). One transaction: if the new statement is wrong, nothing changes."""
        if start_from not in ("earliest", "latest"):
            raise ValidationError(f"start_from must be 'earliest' or 'latest', not {start_from!r}")
        stmt = self._create_as_select(sql, "replace")
        sink = self.catalog.source(stmt.name)
        create = stmt.text.strip()
        if stmt.or_replace:
            create = "CREATE" + create[create.upper().index("REPLACE") + len("REPLACE"):]
        rebuild = [f"SET 'auto.offset.reset' = '{start_from}'", create]
        old = sink.writer_query if sink is not None else None
        if old:
            rebuild = [f"DROP {sink.kind} {sink.name} DELETE TOPIC", *rebuild]
            self.check(";\n".join([f"TERMINATE {old}", *rebuild]), pipeline=pipeline)
            results = self.execute(f"TERMINATE {old}", pipeline=pipeline, issuer=issuer)
            if self.state(old) not in ("PENDING", "UNASSIGNED", "TERMINATED"):
                # its runtime must have stopped writing before the output is deleted
                self.wait_for_state(old, "TERMINATED", timeout=120)
        else:
            results = []
        return results + self.execute(";\n".join(rebuild), pipeline=pipeline, issuer=issuer)

    def check(self, script: str, *, pipeline: str | None = None) -> None:
        """Validate a whole script against the catalog without applying any of it."""
        statements = parse(script)
        with self.catalog.engine.connect() as conn:
            planner = self._planner(conn, pipeline)
            for stmt in statements:
                planner.plan(stmt)

    # -- reading state -----------------------------------------------------------------
    def query(self, query_id: str) -> QueryInfo:
        query = self.catalog.query(query_id.upper())
        if query is None:
            raise NotFoundError(f"no query {query_id!r}")
        return query

    def state(self, query_id: str) -> str:
        """Observed state as SHOW QUERIES shows it (UNASSIGNED when its runtime is gone)."""
        query = self.query(query_id)
        return shown_state(query, self.catalog.leases().get(query.id))

    def queries(self, pipeline: str | None = None) -> list[dict[str, Any]]:
        """Every query (optionally of one pipeline) with state, progress and last error."""
        return query_rows(self.catalog, self.catalog.queries(pipeline))

    def progress(self, query_id: str) -> Progress | None:
        return self.catalog.progress(self.query(query_id).id)

    # -- waiting -------------------------------------------------------------------------
    def wait_for_state(self, query_id: str, state: str, *, timeout: float = 60.0,
                       poll: float = 0.1) -> str:
        """Return once the query's observed state is ``state``.

        Raises :class:`StateError` if it goes to ERROR (unless ERROR is awaited) and
        :class:`WaitTimeout` when ``timeout`` seconds pass.
        """
        state = state.upper()
        deadline = time.monotonic() + timeout
        while True:
            query = self.query(query_id)
            current = shown_state(query, self.catalog.leases().get(query.id))
            if current == state:
                return current
            if current == "ERROR" and state != "ERROR":
                raise StateError(f"query {query.id} failed while waiting for {state}: {query.error}")
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"query {query.id} is {current}, not {state}, after {timeout:g}s")
            time.sleep(poll)

    def wait_caught_up(self, query_id: str, *, timeout: float = 60.0, poll: float = 0.2) -> int:
        """Return once every input record that existed at the call has been processed and
        its output committed. Returns the number of input files that were awaited."""
        query = self.query(query_id)
        wanted: set[str] = set()
        # tables joined as of each batch are read whole each time, never consumed
        static = set(query.properties.get("plan", {}).get("static_tables", []))
        for name in (n for n in query.sources if n not in static):
            src = self.catalog.source(name)
            if src is not None:
                wanted.update(topics.committed_files(src.path))
        deadline = time.monotonic() + timeout
        while True:
            missing = wanted - processed_files(query.checkpoint)
            if not missing:
                return len(wanted)
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"query {query.id} ({self.state(query.id)}) has not processed "
                                  f"{len(missing)} of {len(wanted)} input files after {timeout:g}s")
            time.sleep(poll)

    def wait_for_results(self, results: Iterable[Result], *, timeout: float = 60.0) -> None:
        """Wait until the observed state reflects each statement's effect (``exec --wait``)."""
        deadline = time.monotonic() + timeout
        for result in results:
            for query_id, state in result.waits:
                self.wait_for_state(query_id, state, timeout=max(0.0, deadline - time.monotonic()))
            if result.version is not None and result.query_id:
                self.wait_for_version(result.query_id, result.version,
                                      timeout=max(0.0, deadline - time.monotonic()))

    def wait_for_version(self, query_id: str, version: int, *, timeout: float = 60.0,
                         poll: float = 0.1) -> None:
        """Return once a runtime runs ``version`` of the query; raise :class:`StateError` if
        that version was rolled back. (It may still be in its readiness window: see
        ``query_versions.outcome``, ACTIVE once ready.)"""
        deadline = time.monotonic() + timeout
        while True:
            row = next(v for v in self.catalog.versions(query_id.upper()) if v["version"] == version)
            if row["outcome"] == "ROLLED_BACK":
                raise StateError(f"version {version} of {query_id} was rolled back: {row['error']}")
            if self.query(query_id).running_version == version:
                return
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"version {version} of {query_id} is not running after {timeout:g}s")
            time.sleep(poll)
