"""The one door: every caller (CLI, runtime tooling, Airflow operators) goes through Engine.

The Airflow half imports nothing of the core but this module and the other faces
(``tests/test_structure.py``): what it needs is a method of :class:`Engine` (its reading
side is the read model's :class:`~.views.reader.Reader`), and the plain values those
methods return are named here (:data:`__all__`)."""

# long module: the one door is one class (DESIGN.md section 1), one method per thing a caller
# does, the Airflow half's included; its methods are thin calls of the planner, catalog and
# conditions, read together as the package's whole surface.
from __future__ import annotations

import dataclasses
import getpass
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from .catalog import (
    DEFAULT_PIPELINE,
    BadRecord,
    Catalog,
    DesiredState,
    Progress,
    QueryInfo,
    QueryState,
    SourceInfo,
    default_home,
    default_pipeline,
)
from .catalog import urls as catalog_urls
from .catalog.deploys import Deploy, DeployAction, DeployChange
from .conditions import (
    AllOf,
    CaughtUp,
    Check,
    Condition,
    Ending,
    QueriesInState,
    ShadowReady,
    VersionRunning,
    WaitEnd,
    end_of,
)
from .errors import NotFoundError, StateError, ValidationError, WaitFailed, WaitTimeout
from .language import parse, parse_one
from .language.deploys import RecordDeploy, RollbackDeploy
from .language.limits import Limits
from .language.names import check_object_name
from .language.starting import START, timestamp_millis, timestamp_text
from .language.statements import (
    CreateAsSelect,
    CreateSource,
    Describe,
    DropSource,
    QueryControl,
    SetProperty,
    ShadowAction,
    Show,
    Statement,
)
from .planner import Planner, Planning, deploy
from .planner.deploy import DeployPlan
from .planner.deploy_history import AT_REST
from .planner.step import reads_last
from .results import Result
from .storage import kafka_properties
from .storage.kafka_topics import KafkaSettings
from .storage.layout import Layout, Part
from .upgrades import Report
from .upgrades.report import VERDICTS
from .views.descriptions import QueryDescription, SourceDescription
from .views.events import EVENTS, QueryEvent, check_events
from .views.lag import LagPoint
from .views.lineage import Dataset, InputColumn, QueryLineage
from .views.reader import RUNTIME_STALE_AFTER, Names, Reader
from .views.rows import QUERY_COLUMNS

__all__ = ["Engine", "DEFAULT_PIPELINE", "RUNTIME_STALE_AFTER", "QUERY_COLUMNS", "EVENTS", "VERDICTS"]
# the values Engine's methods return, besides results.Result and the errors
__all__ += ["QueryInfo", "Progress", "BadRecord", "QueryEvent", "QueryLineage", "Dataset", "InputColumn"]
__all__ += ["Report", "DeployPlan", "QueryState", "DesiredState", "Names", "WaitEnd", "Ending"]
__all__ += ["SourceDescription", "QueryDescription", "LagPoint", "Deploy", "DeployChange", "DeployAction"]


class Engine(Reader):
    """Execute StreamQL, read query state (the read side is :class:`~.views.reader.Reader`),
    and wait for it.

    :param catalog: catalog URL (SQLite or PostgreSQL) or an open :class:`Catalog`;
        default ``$STREAMQL_CATALOG`` or SQLite under ``home``.
    :param home: directory for file topics and checkpoints; default ``$STREAMQL_HOME``
        or ``./.streamql``.
    :param pipeline: pipeline that new queries belong to and ``ALL`` refers to.
    :param issuer: who issues statements, recorded in the command log.
    :param limits: bounds on each statement's size and work (see docs/operations.md,
        Security); default :meth:`Limits.from_env` (``STREAMQL_MAX_*``).
    :param kafka_bootstrap_servers: the Kafka cluster ``INSERT VALUES``, ``PRINT`` and pull
        queries on Kafka topics talk to (wins over the Kafka properties' ``bootstrap.servers``).
    :param kafka_properties: Kafka client properties (Java client names, secrets included:
        settings, or ``key=value`` text), over those of ``$STREAMQL_KAFKA_PROPERTIES`` and the
        file ``$STREAMQL_KAFKA_PROPERTIES_FILE`` names, which are always read.
    """

    def __init__(
        self,
        catalog: str | Catalog | None = None,
        *,
        home: str | None = None,
        pipeline: str | None = None,
        issuer: str | None = None,
        limits: Limits | None = None,
        kafka_bootstrap_servers: str | None = None,
        kafka_properties: Mapping[str, str] | str | None = None,
    ):
        self.limits = limits if limits is not None else Limits.from_env()
        self.home = os.path.abspath(home) if home else default_home()
        os.makedirs(self.home, exist_ok=True)
        catalog = catalog if isinstance(catalog, Catalog) else Catalog(catalog, home=self.home)
        super().__init__(catalog, pipeline or default_pipeline())
        sqlite_file = self.catalog.engine.url.database if self.catalog.dialect == "sqlite" else None
        self.layout = Layout(self.home, protected=[sqlite_file] if sqlite_file else [])
        self.issuer = issuer or f"user:{getpass.getuser()}"
        self.kafka = KafkaSettings.of(
            os.environ, bootstrap_servers=kafka_bootstrap_servers, properties=kafka_properties
        )

    def close(self) -> None:
        self.catalog.close()

    # -- statements --------------------------------------------------------------------
    def execute(
        self,
        script: str,
        *,
        pipeline: str | None = None,
        issuer: str | None = None,
        skip_unchanged: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> list[Result]:
        """Parse ``script`` (``;``-separated StreamQL statements) and :meth:`run` it."""
        statements = parse(script, limits=self.limits)
        return self.run(statements, pipeline=pipeline, issuer=issuer, skip_unchanged=skip_unchanged, settings=settings)

    def run(
        self,
        statements: Sequence[Statement],
        *,
        pipeline: str | None = None,
        issuer: str | None = None,
        skip_unchanged: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> list[Result]:
        """Validate every statement, then apply them all in one catalog transaction.

        This is the one entry point that changes anything; callers hand it parsed statement
        objects (from :func:`~.language.parse`, or built with ``QueryControl.of`` and the
        like), never SQL text assembled from their inputs. If any statement is wrong, the
        error names it and nothing is applied. Statements that write files (INSERT VALUES,
        DROP ... DELETE TOPIC) do so inside the transaction, under the catalog's write lock,
        once every statement has been checked; if one fails, the transaction is rolled back
        and the file effects before it undone. Reads never hold the write lock: a script of
        reads only (SELECT, SHOW, DESCRIBE, EXPLAIN, DIFF) is planned in a read transaction,
        and pull queries run after it (in a script that writes, after its commit, so they
        see what it wrote; one that fails then raises with the writes applied): a read
        before a statement that changes what it reads is refused, as it would show what
        came after it. With
        ``skip_unchanged``, a CREATE, ALTER or INSERT INTO ... SELECT whose object already
        exists exactly as defined changes nothing (its result's ``action`` is
        ``"unchanged"``): applying a script twice is applying it once. ``settings`` are the
        session's ``SET`` properties the statements start from (a shell carries them from one
        request to the next; each ``SET`` result's ``details["set"]`` says what it changed).
        """
        statements = list(statements)
        pipeline = pipeline or self.pipeline
        issuer = issuer or self.issuer
        # PROMOTE ... WHEN READY waits before anything is planned (no transaction held) and
        # fails with the figures, the script unapplied
        gated = {i: stmt for i, stmt in enumerate(statements) if isinstance(stmt, ShadowAction) and stmt.ready}
        gates = {i: self._await_ready(stmt) for i, stmt in gated.items()}
        if gates:
            results = self.run(
                [
                    dataclasses.replace(gated[i], ready=None) if i in gated else stmt
                    for i, stmt in enumerate(statements)
                ],
                pipeline=pipeline,
                issuer=issuer,
                skip_unchanged=skip_unchanged,
                settings=settings,
            )
            for i, (end, waited) in gates.items():
                results[i] = dataclasses.replace(
                    results[i],
                    statement=statements[i].text,
                    message=f"Ready after {waited:.1f}s ({end.message}). {results[i].message}",
                    details={**results[i].details, "readiness": {**end.details, "waited": round(waited, 3)}},
                )
            return results
        if not any(stmt.writes for stmt in statements):
            return self._read(statements, pipeline, settings)
        undo: list = []
        try:
            with self.catalog.transaction() as conn:
                planner = self._planner(conn, pipeline, settings)
                planner.skip_unchanged, planner.issuer = skip_unchanged, issuer
                steps = [planner.plan(stmt) for stmt in statements]
                reads_last(statements, steps)
                for stmt, step in zip(statements, steps, strict=True):
                    if step.write:
                        step.write(conn)
                    if step.log:
                        self.catalog.commands.log(conn, stmt.text.strip(), pipeline, issuer)
                for step in steps:  # every check passed: files change under the write lock
                    if step.files:
                        undo.append(step.run_files())
        except BaseException:
            for restore in reversed(undo):
                restore()
            raise
        for step in steps:
            if step.after_commit:
                step.after_commit(step.result)
        for step in steps:
            step.run_read(wrote=True)
        return [step.result for step in steps]

    def _await_ready(self, stmt: ShadowAction) -> tuple[WaitEnd, float]:
        """Wait until the shadow ``PROMOTE ... WHEN READY`` names is ready (:class:`ShadowReady`);
        how the wait ended and how long it took. StateError with the figures when it was not
        ready within the statement's WITHIN, or can no longer be."""
        gate = stmt.ready
        assert gate is not None, "a readiness gate is waited for"
        started = time.monotonic()
        end = self.wait_end(ShadowReady(stmt.query_id, gate.max_lag, gate.window), timeout=gate.within, poll=0.2)
        waited = time.monotonic() - started
        if end.ending is not Ending.REACHED:
            why = "not ready within" if end.ending is Ending.TIMED_OUT else "cannot become ready; gave up after"
            raise StateError(
                f"{stmt.text.strip()}: the shadow is {why} {waited:.1f}s: {end.message}; nothing was promoted",
                line=stmt.line,
                col=stmt.col,
                text=stmt.text.strip()[:120],
            )
        return end, waited

    def _read(self, statements: list[Statement], pipeline: str, settings: Mapping[str, str] | None) -> list[Result]:
        """A script of reads: planned in a read transaction (never the write lock), which
        ends before what runs after it (DESCRIBE ... STATE's rows) and its pull queries."""
        with self.catalog.engine.connect() as conn:
            planner = self._planner(conn, pipeline, settings)
            steps = [planner.plan(stmt) for stmt in statements]
        for step in steps:
            if step.after_commit:
                step.after_commit(step.result)
        for step in steps:
            step.run_read(wrote=False)
        return [step.result for step in steps]

    def control(
        self,
        action: str,
        query_id: str | None,
        *,
        skip_bad_records: bool = False,
        pipeline: str | None = None,
        issuer: str | None = None,
    ) -> Result:
        """``PAUSE``, ``RESUME`` or ``TERMINATE`` one query (``query_id``) or every query of
        the pipeline (None or ``'ALL'``). The ID is checked against the grammar of names,
        so no input can make this more than one statement."""
        statement = QueryControl.of(action, query_id, skip_bad_records=skip_bad_records)
        return self.run([statement], pipeline=pipeline, issuer=issuer)[0]

    def validate(self, sql: str, *, query_id: str | None = None, pipeline: str | None = None) -> Report:
        """The validator's report for one ``CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT``
        of an existing query's output (``query_id``, when given, must be that query), or for
        ``CREATE [OR REPLACE] STREAM|TABLE s (columns)`` of a declared source (the report's
        ``source`` is set: what the change means for the source and the queries reading it).
        Changes nothing."""
        stmt = _statement(sql)
        if isinstance(stmt, CreateSource):
            if query_id is not None:
                raise ValidationError(f"query_id {query_id!r} names a query; the statement declares {stmt.name}")
            with self.catalog.engine.connect() as conn:
                return self._planner(conn, pipeline).check_replace_source(stmt)[1]
        stmt = self._create_as_select(stmt, "validate")
        self._writer(stmt, query_id)
        return self._check_replace(stmt, pipeline)[1]

    def writer_of(self, sql: str, *, query_id: str | None = None) -> str | None:
        """The query that writes the output of a ``CREATE ... AS SELECT`` (None if no
        query does); with ``query_id``, raise unless it is that query."""
        return self._writer(self._create_as_select(sql, "writer_of"), query_id)

    def _create_as_select(self, sql: str | Statement, verb: str) -> CreateAsSelect:
        stmt = _statement(sql)
        if not isinstance(stmt, CreateAsSelect):
            raise ValidationError(
                f"{verb} takes one CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT statement, got {type(stmt).__name__}",
                line=stmt.line,
                col=stmt.col,
                text=stmt.text.strip()[:120],
            )
        return stmt

    def _planner(self, conn, pipeline: str | None, settings: Mapping[str, str] | None = None) -> Planner:
        return Planner(
            Planning(
                self.catalog,
                conn,
                self.catalog.snapshot(conn),
                self.home,
                pipeline or self.pipeline,
                self.layout,
                limits=self.limits,
                read_state=_read_state,
                settings=dict(settings or {}),
                kafka=self.kafka,
            )
        )

    def _check_replace(self, stmt: CreateAsSelect, pipeline: str | None):
        with self.catalog.engine.connect() as conn:
            return self._planner(conn, pipeline).check_replace(stmt)

    def dry_run(
        self,
        sql: str,
        spark: Any = None,
        *,
        query_id: str | None = None,
        pipeline: str | None = None,
        master: str = "local[*]",
    ) -> Report:
        """:meth:`validate`, then run the new version on ``spark`` over a copy of the live
        checkpoint with a sink that writes nothing, so Spark's own checks have their say.
        A Spark refusal turns an IN_PLACE verdict into REJECTED (finding SPARK_REFUSED).
        Without ``spark``, the process's session when Spark runs here, else a local one on
        ``master`` made for the run (after the statement was validated) and stopped after."""
        from .runtime.dryrun import check_on_spark

        stmt = _statement(sql)
        if isinstance(stmt, CreateSource):
            raise ValidationError(f"a dry run runs a query's new version; validate {stmt.name} (a source) without one")
        stmt = self._create_as_select(stmt, "dry_run")
        self._writer(stmt, query_id)
        _current, report, new, _sink = self._check_replace(stmt, pipeline)
        sources = {n: self._source(n) for n in new.sources}
        check_on_spark(report, new, sources, spark=spark, master=master)
        return report

    def upgrade(
        self,
        sql: str,
        *,
        query_id: str | None = None,
        shadow: bool = False,
        pipeline: str | None = None,
        issuer: str | None = None,
    ) -> Result:
        """The in-place upgrade: ``CREATE [OR REPLACE] STREAM|TABLE x AS SELECT`` of the
        output of an existing query (OR REPLACE is implied), applied only if the validator
        says IN_PLACE. ``query_id``, when given, must be the query that writes ``x``. With
        ``shadow``, the new version starts beside the query instead (``WITH (shadow=true)``):
        PROMOTE or DISCARD it later."""
        stmt = self._create_as_select(sql, "upgrade")
        if shadow or "shadow" in stmt.properties:  # the argument decides, not the text
            stmt = dataclasses.replace(stmt, properties={**stmt.properties, "shadow": shadow})
        if self._writer(stmt, query_id) is None:
            raise NotFoundError(
                f"no query writes {stmt.name}; create it with CREATE {stmt.kind} {stmt.name} AS SELECT ..."
            )
        return self.run([dataclasses.replace(stmt, or_replace=True)], pipeline=pipeline, issuer=issuer)[0]

    def replace(
        self,
        sql: str,
        *,
        start_from: str | None = None,
        query_id: str | None = None,
        pipeline: str | None = None,
        issuer: str | None = None,
    ) -> list[Result]:
        """The replacing upgrade, for what cannot be done in place: TERMINATE the query that
        writes the statement's output, DROP that output with its data (a Kafka topic keeps its
        records: streamql never deletes a topic), and create it again on a new checkpoint
        reading its sources from ``start_from``: ``'earliest'``, ``'latest'`` (Kafka topics
        only) or a time (ISO-8601 with its zone, or epoch milliseconds: each Kafka partition
        from its first record at or after it, a file topic from its first file committed at or
        after it). The statement's own ``WITH (start = ...)`` takes precedence over
        ``start_from``; one of them is needed. The new query has a new ID. If the new statement
        is wrong, nothing changes. ``query_id``, when given, must be the query that writes the
        output."""
        stmt = self._create_as_select(sql, "replace")
        if START in stmt.properties:
            start_from = None  # the statement's own start wins
        elif start_from is None:
            raise ValidationError(
                "a replacing upgrade starts a new checkpoint: say where, with start_from or WITH (start = "
                "'earliest' | 'latest' | '<time>')"
            )
        if start_from is None:
            start: list[Statement] = []
        elif start_from in ("earliest", "latest"):
            start = [SetProperty.of("auto.offset.reset", start_from)]
        else:
            try:
                stamp = timestamp_text(timestamp_millis(start_from))
            except ValueError as e:
                raise ValidationError(
                    f"start_from must be 'earliest', 'latest' or a time, not {start_from!r}: {e}"
                ) from None
            start = [SetProperty.of("starting.timestamp", stamp)]
        old = self._writer(stmt, query_id)
        rebuild: list[Statement] = [*start, dataclasses.replace(stmt, or_replace=False)]
        if old:
            sink = self._source(stmt.name)
            rebuild = [DropSource.of(sink.kind, sink.name, delete_topic=not sink.kafka_topic), *rebuild]
            terminate = QueryControl.of("TERMINATE", old)
            self._check([terminate, *rebuild], pipeline=pipeline)
            results = self.run([terminate], pipeline=pipeline, issuer=issuer)
            if self.state(old) not in (QueryState.PENDING, QueryState.UNASSIGNED, QueryState.TERMINATED):
                # its runtime must have stopped writing before the output is deleted
                self.wait_for_state(old, QueryState.TERMINATED, timeout=120)
        else:
            results = []
        return results + self.run(rebuild, pipeline=pipeline, issuer=issuer)

    def _writer(self, stmt: CreateAsSelect, query_id: str | None) -> str | None:
        """The query writing the statement's output (None if none); it must be ``query_id``."""
        sink = self.catalog.source(stmt.name)
        writer = sink.writer_query if sink is not None else None
        if query_id is not None:
            self.query(query_id)  # NotFoundError for an unknown ID
            if writer != query_id.upper():
                raise ValidationError(
                    f"{stmt.name} is written by {writer or 'no query'}, not by {query_id.upper()}",
                    line=stmt.line,
                    col=stmt.col,
                    text=stmt.text.strip()[:120],
                )
        return writer

    def plan(self, script: str, *, pipeline: str | None = None) -> DeployPlan:
        """What applying a deploy file would do, statement by statement (see
        :mod:`.planner.deploy`); changes nothing."""
        return self._plan_script(deploy.declarations(script), pipeline)

    def _plan_script(self, statements: list[Statement], pipeline: str | None) -> DeployPlan:
        with self.catalog.engine.connect() as conn:
            return deploy.plan_script(self._planner(conn, pipeline), statements, pipeline or self.pipeline)

    def apply(
        self,
        script: str,
        *,
        pipeline: str | None = None,
        issuer: str | None = None,
        teardown: str | None = None,
        plan_fingerprint: str | None = None,
    ) -> tuple[DeployPlan, list[Result]]:
        """Apply a deploy file: plan it in a sandbox, refuse it whole if any statement is
        rejected or needs a replacing upgrade, else apply every change in one transaction,
        upstream before downstream; then the optional ``teardown`` script.

        An apply that changes something is recorded as a deploy (:meth:`deploys`), in the same
        transaction: each query it created or upgraded, the versions before and after, and a
        snapshot of each upgraded query's checkpoint taken before, for :meth:`rollback`. The
        last result before the teardown's is that record (``details["deploy"]``: its id).

        With ``plan_fingerprint`` (a :meth:`plan`'s ``fingerprint``, e.g. the plan a person
        approved), nothing is applied unless the plan is still that one: the same file planned
        against the same catalog definitions, checked again inside the apply's transaction
        (:class:`StateError` otherwise)."""
        issuer = issuer or self.issuer
        statements = deploy.declarations(script)
        deploy_plan = self._plan_script(statements, pipeline)
        if plan_fingerprint is not None and plan_fingerprint != deploy_plan.fingerprint:
            raise StateError(
                f"nothing applied: the plan is no longer the one with fingerprint {plan_fingerprint!r} (the "
                f"catalog or the file changed since; it is {deploy_plan.fingerprint!r} now): plan it again"
            )
        todo = deploy.to_apply(statements, deploy_plan)
        if todo:
            state = deploy_plan.catalog_state if plan_fingerprint is not None else None
            todo.append(RecordDeploy.of(hashlib.sha256(script.encode()).hexdigest(), catalog_state=state))
        results = self.run(todo, pipeline=pipeline, issuer=issuer, skip_unchanged=True) if todo else []
        if teardown:
            results += self.execute(teardown, pipeline=pipeline, issuer=issuer)
        return deploy_plan, results

    def deploys(self, *, pipeline: str | None = None) -> list[Deploy]:
        """The pipeline's deploys (each apply of a deploy file that changed something), oldest
        first: id, file fingerprint, issuer, time, what each changed, whether rolled back."""
        return self.catalog.deploys.of(pipeline or self.pipeline)

    def rollback(
        self,
        deploy_id: int | None = None,
        *,
        pipeline: str | None = None,
        issuer: str | None = None,
        timeout: float = 120.0,
    ) -> Result:
        """Roll back a whole deploy (None: the pipeline's newest one not rolled back): every
        query it upgraded returns to the version it had before and to the snapshot the deploy
        took of its checkpoint (the output of the batches after it is taken out and kept, as
        RESTORE does, so they run again with the old version and each input record is in the
        output once), and every query it created is terminated (its output is kept).

        All or nothing: if any change cannot be undone (a newer version since, a source the
        old version reads dropped, its snapshot gone, a query created since reading what the
        deploy created) it raises :class:`StateError` naming each query and why, and changes
        nothing. The upgraded queries that run are paused first (waiting up to ``timeout``
        seconds for their runtime to stop them), then one transaction rolls everything back and
        resumes them; if it fails they are resumed as they were. The result's ``waits`` say
        what to wait for (:meth:`wait_for_results`), its ``details`` what was done."""
        pipeline = pipeline or self.pipeline
        issuer = issuer or self.issuer
        RollbackDeploy.of(deploy_id)  # a ParseError for what is no deploy number
        with self.catalog.engine.connect() as conn:
            plan = self._planner(conn, pipeline).deploys.rollback_plan(deploy_id)
        paused = plan.running
        if paused:
            self.run([QueryControl.of("PAUSE", q) for q in paused], pipeline=pipeline, issuer=issuer)
        try:
            if paused:
                self.wait(QueriesInState(paused, list(AT_REST), through_retries=True), timeout=timeout)
            statement = RollbackDeploy.of(plan.deploy.id, resume=tuple(paused))
            return self.run([statement], pipeline=pipeline, issuer=issuer)[0]
        except BaseException:
            if paused:  # as they were: the rollback changed nothing else
                self.run([QueryControl.of("RESUME", q) for q in paused], pipeline=pipeline, issuer=issuer)
            raise

    def check(self, script: str, *, pipeline: str | None = None) -> None:
        """Validate a whole script against the catalog without applying any of it."""
        self._check(parse(script), pipeline=pipeline)

    def _check(self, statements: Sequence[Statement], *, pipeline: str | None = None) -> None:
        with self.catalog.engine.connect() as conn:
            planner = self._planner(conn, pipeline)
            for stmt in statements:
                planner.plan(stmt)

    # -- the Airflow half's door: what it needs of the core besides statements ----------
    #: the environment variable a client-mode runtime reads its Kafka client properties from
    KAFKA_PROPERTIES_ENV: ClassVar[str] = kafka_properties.PROPERTIES_ENV
    safe_url = staticmethod(catalog_urls.safe_url)
    url_without_password = staticmethod(catalog_urls.without_password)
    error_line = staticmethod(catalog_urls.error_line)
    render_kafka_properties = staticmethod(kafka_properties.render)

    @property
    def catalog_url(self) -> str:
        """The URL of the catalog this engine opened, its password included (hand it only
        to what runs as this process does: the runtime it submits)."""
        return self.catalog.url

    kafka_secret_in_argv = staticmethod(kafka_properties.secret_in_argv)
    check_events = staticmethod(check_events)

    @staticmethod
    def kafka_secrets(text: str, source: str) -> set[str]:
        """The values in Kafka client properties ``text`` that must never be shown (to mask
        them); :class:`StateError` naming ``source`` and the line if it is not properties."""
        return kafka_properties.secret_values(kafka_properties.parse(text, source))

    def runtime_log(self, pipeline: str) -> str:
        """The path of a new log for a runtime of ``pipeline`` started now, in the home's
        runtimes folder (made if missing); the folder and the path are checked to be no
        links out of it (:class:`StateError`)."""
        log_path = self.layout.runtime_log(pipeline, time.strftime("%Y%m%d-%H%M%S"))
        runtimes = Part(os.path.dirname(log_path))
        os.makedirs(runtimes.folder, exist_ok=True)
        runtimes.resolve(log_path)
        return log_path

    # -- waiting ----------------------------------------------------------------------------
    def wait_end(
        self,
        condition: Condition,
        *,
        timeout: float = 60.0,
        poll: float = 0.1,
        progress: Callable[[Check], None] | None = None,
    ) -> WaitEnd:
        """Wait on ``condition`` until it holds (REACHED), can no longer come true on its own
        (FAILED_FAST: a query in ERROR, terminated, held at a bad record, its version rolled
        back) or ``timeout`` seconds pass (TIMED_OUT); return how it ended, never raising for
        either. What every other wait of the engine and the CLI's waits are made of.

        ``progress`` is called with each check that is not the end, so a caller can say what
        it is waiting for (the CLI does, on standard error)."""
        deadline = time.monotonic() + timeout
        while True:
            check = condition.check(self)
            end = end_of(condition, check, self, expired=time.monotonic() >= deadline, timeout=timeout)
            if end is not None:
                return end
            if progress is not None:
                progress(check)
            time.sleep(poll)

    def wait(self, condition: Condition, *, timeout: float = 60.0, poll: float = 0.1) -> Check:
        """Return the first check of ``condition`` that is done. Raises :class:`WaitFailed` (a
        :class:`StateError`) when it can no longer come true, with the query's state, last
        error and what to do next, and :class:`WaitTimeout` after ``timeout`` seconds, with
        what the query was doing."""
        end = self.wait_end(condition, timeout=timeout, poll=poll)
        raise_unless_reached(end)
        return Check(True, end.message, details=end.details)

    def wait_for_state(
        self, query_id: str, state: str, *, timeout: float = 60.0, poll: float = 0.1, through_retries: bool = False
    ) -> str:
        """Return once the query's observed state is ``state``.

        Raises :class:`WaitFailed` as soon as it can no longer get there on its own (in ERROR
        unless ERROR is awaited or ``through_retries``; terminated; held at a bad record) and
        :class:`WaitTimeout` when ``timeout`` seconds pass.
        """
        self.wait(QueriesInState([query_id], [state], through_retries=through_retries), timeout=timeout, poll=poll)
        return state.upper()

    def wait_caught_up(
        self, query_id: str, *, timeout: float = 60.0, poll: float = 0.2, through_retries: bool = False
    ) -> int:
        """Return once every input record that existed at the call has been processed and
        its output committed. Returns the number of input files that were awaited. Raises
        :class:`WaitFailed` as soon as the query can no longer catch up on its own (in ERROR
        unless ``through_retries``, terminated, held, its version rolled back) and
        :class:`WaitTimeout` after ``timeout`` seconds."""
        check = self.wait(CaughtUp(query_id, through_retries=through_retries), timeout=timeout, poll=poll)
        return check.details["input_files"]

    def wait_for_results(
        self, results: Iterable[Result], *, timeout: float = 60.0, through_retries: bool = False
    ) -> None:
        """Wait until the observed state reflects each statement's effect (``exec --wait``);
        raises as :meth:`wait` does."""
        end = self.results_end(results, timeout=timeout, through_retries=through_retries)
        raise_unless_reached(end)

    def results_end(
        self,
        results: Iterable[Result],
        *,
        timeout: float = 60.0,
        poll: float = 0.1,
        through_retries: bool = False,
        progress: Callable[[Check], None] | None = None,
    ) -> WaitEnd:
        """How waiting for each statement's effect ended (:meth:`wait_end` for ``exec --wait``):
        each query in the state its statement asks for, a replaced one running its new version."""
        # what the script leaves each query in: a later statement's state wins
        states: dict[str, str] = {}
        versions: dict[str, int] = {}
        for result in results:
            for query_id, state in result.waits:
                states[query_id] = state
            replaced = result.action == "replaced" and result.query_id and result.version is not None
            if replaced and (result.query_id, QueryState.RUNNING) in result.waits:
                assert result.query_id is not None and result.version is not None
                versions[result.query_id] = result.version
        conditions: list[Condition] = [*QueriesInState.by_state(states.items(), through_retries=through_retries)]
        conditions += [
            VersionRunning(query_id, version, through_retries=through_retries)
            for query_id, version in versions.items()
            if states.get(query_id) == QueryState.RUNNING
        ]
        if not conditions:
            return WaitEnd(Ending.REACHED, "nothing to wait for")
        return self.wait_end(AllOf.of(*conditions), timeout=timeout, poll=poll, progress=progress)

    def describe_source(self, name: str, *, pipeline: str | None = None) -> SourceDescription:
        """``DESCRIBE <name> EXTENDED`` as typed values (ksqlDB's ``SourceDescription``): its
        fields, formats, topic, statement, the queries reading and writing it, their runtime
        statistics and, on a Kafka topic, each reading query's position and lag per partition
        (the engine's Kafka settings). Raises :class:`NotFoundError` for an unknown source."""
        checked = check_object_name(name, "stream or table name")  # never text to parse
        if self.catalog.source(checked) is None:
            raise NotFoundError(f"unknown stream or table {name!r}")
        stmt = Describe(name=checked, extended=True, text=f"DESCRIBE {checked} EXTENDED")
        (result,) = self.run([stmt], pipeline=pipeline)
        return result.description

    def describe_queries(self, *, pipeline: str | None = None) -> list[QueryDescription]:
        """``SHOW QUERIES EXTENDED`` as typed values (ksqlDB's ``QueryDescription``), oldest
        first: each query's state, SQL, sources, sinks, execution plan, overridden properties,
        runtime statistics and errors."""
        (result,) = self.run([Show(what="QUERIES", extended=True, text="SHOW QUERIES EXTENDED")], pipeline=pipeline)
        return result.description

    def _source(self, name: str) -> SourceInfo:
        """Stream or table ``name``, or NotFoundError."""
        source = self.catalog.source(name)
        if source is None:
            raise NotFoundError(f"unknown stream or table {name!r}")
        return source

    def wait_for_version(
        self,
        query_id: str,
        version: int,
        *,
        timeout: float = 60.0,
        poll: float = 0.1,
        ready: bool = False,
        through_retries: bool = False,
    ) -> None:
        """Return once a runtime runs ``version`` of the query (with ``ready``: and it left
        its readiness window); raise :class:`WaitFailed` if that version was rolled back or
        the query can no longer run it on its own."""
        self.wait(VersionRunning(query_id, version, ready, through_retries), timeout=timeout, poll=poll)


def raise_unless_reached(end: WaitEnd) -> None:
    """Raise what a wait that did not reach its goal raises: :class:`WaitFailed` or
    :class:`WaitTimeout`, carrying ``end``."""
    if end.ending is Ending.FAILED_FAST:
        raise WaitFailed(end.message, end=end)
    if end.ending is Ending.TIMED_OUT:
        raise WaitTimeout(end.message, end=end)


def _read_state(checkpoint: str, operators: list, limit: int) -> tuple[list[str], list[list[Any]]]:
    """DESCRIBE ... STATE's reader of Spark state (:data:`.views.describe.StateReader`): the
    runtime's, loaded (and Spark started) only when a statement asks for state rows."""
    from .runtime.state import read_state

    return read_state(checkpoint, operators, limit)


def _statement(sql: str | Statement) -> Statement:
    """One statement, given parsed or as text (read through the grammar here, the door)."""
    return sql if isinstance(sql, Statement) else parse_one(sql)
