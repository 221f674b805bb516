"""The catalog database: the control plane's source of truth and command channel."""
from __future__ import annotations

import json
import os
import re
import time
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import quote, unquote

from sqlalchemy import (Connection, create_engine, delete, func, insert, make_url, or_, select,
                        update)
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from ..errors import CatalogError, first_line
from ..storage.layout import Layout, default_home
from . import schema as s
from .connections import serialise_sqlite, write_connection
from .migrations import LATEST, migrate
from .model import BadRecord, Progress, QueryInfo, Snapshot, SourceInfo


#: batches of throughput history kept per query
HISTORY = 60


def default_url(home: str | None = None) -> str:
    """``$STREAMQL_CATALOG``, else a SQLite file under the home directory."""
    url = os.environ.get("STREAMQL_CATALOG")
    if url:
        return url
    home = home or default_home()
    os.makedirs(home, exist_ok=True)
    return f"sqlite:///{Layout(home).catalog_file}"


#: a URL's scheme (``postgresql+psycopg://``)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
#: query parameters that carry secrets (libpq takes ``?password=``)
_SECRET_PARAM = re.compile(r"([?&;][^=&;#]*(?:pass|secret|token|key)[^=&;#]*=)[^&;#]*", re.IGNORECASE)


def safe_url(url: str) -> str:
    """A catalog URL fit to show, even one that does not parse: everything between its
    scheme and its last ``@`` is credentials (a password may itself hold ``@``, ``:`` or
    ``/``), shown as ``user:***``; secret query parameters as ``***``. A string that does
    not parse, has no ``@`` but a ``:`` may be ``user:password`` without a host
    (``postgresql://u:pw/db``): only its scheme is shown. One with neither holds no
    credentials part and is shown as it is."""
    text = str(url)
    at = text.rfind("@")
    scheme = _SCHEME.match(text)
    if at < 0:
        try:
            make_url(text).port  # noqa: B018 -- parses, port included
        except Exception:
            if ":" in text:
                return f"{scheme.group(0)}..." if scheme else "(not shown: not a URL)"
    else:
        start = scheme.end() if scheme else 0
        while start < at and text[start] == "/":
            start += 1
        user, colon, _ = text[start:at].partition(":")
        text = text[:start] + (f"{user}:***" if colon else user) + text[at:]
    return _SECRET_PARAM.sub(r"\1***", text)


def without_password(url: str | URL) -> str:
    """``url`` with its password removed (``URL.set(password=None)`` keeps it: None means
    "unchanged" there), rendered in full."""
    u = make_url(url)
    return URL.create(u.drivername, username=u.username, password=None, host=u.host, port=u.port,
                      database=u.database, query=u.query).render_as_string(hide_password=False)


def _redact(text: str, url: str) -> str:
    """``text`` (a driver's error message, say) with the password of ``url`` masked, in
    the forms a message could carry it in."""
    try:
        password = make_url(url).password
    except Exception:
        password = None
    for form in {password, quote(password or "", safe=""), unquote(password or "")} - {None, ""}:
        text = text.replace(form, "***")
    return text


def _env_password() -> str | None:
    """The catalog password the runtime was handed: ``$STREAMQL_CATALOG_PASSWORD``, else
    the first line of the file ``$STREAMQL_CATALOG_PASSWORD_FILE`` names (a cluster-mode
    driver gets a file or a Kubernetes secret, never a value in spark-submit's argv)."""
    password = os.environ.get("STREAMQL_CATALOG_PASSWORD")
    if password:
        return password
    path = os.environ.get("STREAMQL_CATALOG_PASSWORD_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n") or None
    except OSError as e:
        raise CatalogError(f"cannot read the catalog password file {path!r} "
                           f"($STREAMQL_CATALOG_PASSWORD_FILE): {e.strerror}") from None


def _with_env_password(url: str) -> str:
    """The environment's password (see :func:`_env_password`) fills in a URL without one:
    runtimes get it in an environment variable whose name Spark redacts, or a file, not in
    a URL it would show."""
    if url.startswith("sqlite"):
        return url
    password = _env_password()
    if not password:
        return url
    try:
        parsed = make_url(url)
    except Exception:  # reported, masked, when the catalog opens it
        return url
    return url if parsed.password else parsed.set(password=password).render_as_string(hide_password=False)


def _parse(url: str) -> URL:
    """``url`` parsed, or a CatalogError naming what is wrong with it (never its password)."""
    example = "e.g. postgresql+psycopg://user@host:5432/streamql or sqlite:////path/catalog.db"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CatalogError(f"catalog URL {safe_url(url)!r} is not a database URL ({example})") from None
    except ValueError:  # SQLAlchemy's int(port); its message would echo the text
        raise CatalogError(f"catalog URL {safe_url(url)!r} has a port that is not a number "
                           f"({example})") from None
    if "@" in (parsed.host or ""):  # the driver would try a host holding part of the password
        raise CatalogError(f"catalog URL {safe_url(url)!r}: its user or password holds '@', ':' or "
                           f"'/'; percent-encode them (@ is %40)") from None
    return parsed


class Catalog:
    """Access to one catalog database (SQLite or PostgreSQL), migrated to the latest schema."""

    def __init__(self, url: str | None = None, *, home: str | None = None, migrate_to: int = LATEST):
        self.url = _with_env_password(url or default_url(home))
        if self.url.startswith("postgresql://"):
            self.url = "postgresql+psycopg://" + self.url[len("postgresql://"):]
        parsed = _parse(self.url)
        shown = safe_url(self.url)
        try:
            if parsed.get_backend_name() == "sqlite":
                self.engine = create_engine(parsed, poolclass=NullPool,
                                            connect_args={"timeout": 60, "check_same_thread": False})
                serialise_sqlite(self.engine)
            else:
                self.engine = create_engine(parsed, pool_pre_ping=True)
        except NoSuchModuleError:
            raise CatalogError(f"catalog URL {shown!r}: no database driver "
                               f"{parsed.drivername!r} (e.g. postgresql+psycopg, sqlite)") from None
        except ImportError as e:
            raise CatalogError(f"catalog URL {shown!r}: the driver of {parsed.drivername!r} is not "
                               f"installed ({e.msg})") from None
        except Exception as e:  # any other refusal of the URL (a bad query argument, ...)
            raise CatalogError(f"catalog URL {shown!r} cannot be used: "
                               f"{_redact(first_line(e), self.url)}") from None
        try:
            self.dialect = self.engine.dialect.name
            migrate(self.engine, migrate_to) if migrate_to else None
        except (ArgumentError, DBAPIError) as e:  # DBAPIError: OperationalError, InterfaceError, ...
            self.engine.dispose()
            raise CatalogError(f"cannot open catalog {shown!r}: {_redact(first_line(e), self.url)}") from None

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One serialised read-write transaction: statements are applied one script at a time."""
        with write_connection(self.engine, exclusive=True) as conn:
            yield conn

    # -- statements -----------------------------------------------------------------
    def snapshot(self, conn: Connection) -> Snapshot:
        sources = {r.name: SourceInfo.from_row(r) for r in conn.execute(select(s.sources))}
        queries = {r.id: QueryInfo.from_row(r) for r in conn.execute(select(s.queries))}
        next_seq = (conn.execute(select(func.max(s.queries.c.seq))).scalar() or 0) + 1
        return Snapshot(sources, queries, next_seq)

    def insert_source(self, conn: Connection, src: SourceInfo) -> None:
        conn.execute(insert(s.sources).values(
            name=src.name, kind=src.kind, columns=src.column_json(),
            properties=json.dumps(src.properties), format=src.format, path=src.path,
            writer_query=src.writer_query, created_at=time.time()))

    def ensure_source(self, src: SourceInfo) -> SourceInfo:
        """The source named ``src.name``, inserted as ``src`` if it does not exist yet."""
        with write_connection(self.engine) as conn:
            existing = self.source(src.name, conn)
            if existing is not None:
                return existing
            self.insert_source(conn, src)
            return src

    def update_source(self, conn: Connection, src: SourceInfo) -> None:
        conn.execute(update(s.sources).where(s.sources.c.name == src.name).values(
            columns=src.column_json(), writer_query=src.writer_query, path=src.path,
            properties=json.dumps(src.properties), format=src.format))

    def delete_source(self, conn: Connection, name: str) -> None:
        conn.execute(delete(s.sources).where(s.sources.c.name == name))

    def insert_query(self, conn: Connection, q: QueryInfo, sink: SourceInfo) -> None:
        now = time.time()
        conn.execute(insert(s.queries).values(
            id=q.id, seq=q.seq, pipeline=q.pipeline, kind=q.kind, sink=q.sink,
            **q.definition(), version=q.version, checkpoint=q.checkpoint,
            desired_state=q.desired_state, observed_state=q.observed_state, error=None,
            created_at=now, updated_at=now))
        self._insert_version(conn, q, sink, None)

    def _insert_version(self, conn: Connection, q: QueryInfo, sink: SourceInfo,
                        report: dict[str, Any] | None) -> None:
        conn.execute(insert(s.query_versions).values(
            query_id=q.id, version=q.version, **q.definition(),
            sink_columns=sink.column_json(), checkpoint=q.checkpoint,
            verdict=report["verdict"] if report else None,
            report=json.dumps(report) if report else None, created_at=time.time()))

    def add_version(self, conn: Connection, q: QueryInfo, sink: SourceInfo,
                    report: dict[str, Any]) -> None:
        """Make ``q`` (already carrying its new version number) the query's desired version."""
        conn.execute(update(s.queries).where(s.queries.c.id == q.id).values(
            **q.definition(), version=q.version, desired_state=q.desired_state,
            updated_at=time.time()))
        self.update_source(conn, sink)
        self._insert_version(conn, q, sink, report)

    def next_version(self, conn: Connection, query_id: str) -> int:
        """Versions are never reused, even after a rollback."""
        return (conn.execute(select(func.max(s.query_versions.c.version))
                             .where(s.query_versions.c.query_id == query_id)).scalar() or 0) + 1

    def versions(self, query_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        with self._reading(conn) as conn:
            rows = conn.execute(select(s.query_versions).where(
                s.query_versions.c.query_id == query_id).order_by(s.query_versions.c.version))
            return [dict(r._mapping) for r in rows]

    def mark_version(self, query_id: str, version: int, **values: Any) -> None:
        """Record a version's start, end, outcome or error (as the runtime sees them)."""
        with write_connection(self.engine) as conn:
            conn.execute(update(s.query_versions).where(
                s.query_versions.c.query_id == query_id, s.query_versions.c.version == version)
                .values(**values))

    def roll_back(self, query_id: str, good: int, failed: int, error: str) -> None:
        """Make version ``good`` the query's version again and record why ``failed`` ended."""
        now = time.time()
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.query_versions).where(
                s.query_versions.c.query_id == query_id, s.query_versions.c.version == good)).one()
            conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(
                **{name: row._mapping[name] for name in s.DEFINITION}, version=good, updated_at=now))
            sink = conn.execute(select(s.queries.c.sink).where(s.queries.c.id == query_id)).scalar()
            conn.execute(update(s.sources).where(s.sources.c.name == sink)
                         .values(columns=row.sink_columns))
            conn.execute(update(s.query_versions).where(
                s.query_versions.c.query_id == query_id, s.query_versions.c.version == failed)
                .values(outcome="ROLLED_BACK", ended_at=now, error=error))

    def set_desired(self, conn: Connection, query_id: str, state: str) -> None:
        conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(
            desired_state=state, updated_at=time.time()))

    def log_command(self, conn: Connection, statement: str, pipeline: str, issuer: str) -> int:
        result = conn.execute(insert(s.commands).values(
            statement=statement, pipeline=pipeline, issuer=issuer, issued_at=time.time()))
        return result.inserted_primary_key[0]

    # -- reads (pass ``conn`` to read inside an open transaction) ---------------------------
    @contextmanager
    def _reading(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self.engine.connect() as fresh:
                yield fresh
    def queries(self, pipeline: str | None = None, conn: Connection | None = None) -> list[QueryInfo]:
        stmt = select(s.queries).order_by(s.queries.c.seq)
        if pipeline is not None:
            stmt = stmt.where(s.queries.c.pipeline == pipeline)
        with self._reading(conn) as conn:
            return [QueryInfo.from_row(r) for r in conn.execute(stmt)]

    def query(self, query_id: str, conn: Connection | None = None) -> QueryInfo | None:
        with self._reading(conn) as conn:
            row = conn.execute(select(s.queries).where(s.queries.c.id == query_id)).first()
        return QueryInfo.from_row(row) if row else None

    def source(self, name: str, conn: Connection | None = None) -> SourceInfo | None:
        with self._reading(conn) as conn:
            row = conn.execute(select(s.sources).where(s.sources.c.name == name)).first()
        return SourceInfo.from_row(row) if row else None

    def commands(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        with self._reading(conn) as conn:
            return [dict(r._mapping) for r in conn.execute(select(s.commands).order_by(s.commands.c.seq))]

    def progress(self, query_id: str, conn: Connection | None = None) -> Progress | None:
        with self._reading(conn) as conn:
            row = conn.execute(select(s.progress).where(s.progress.c.query_id == query_id)).first()
        if row is None:
            return None
        data = dict(row._mapping)
        data["source_offsets"] = json.loads(data["source_offsets"])
        data["state_operators"] = json.loads(data["state_operators"])
        return Progress(**data)

    def leases(self, conn: Connection | None = None) -> dict[str, dict[str, Any]]:
        """query id -> {runtime_id, epoch, expires_at, heartbeat_at} of its lease holder."""
        stmt = select(s.leases, s.runtimes.c.heartbeat_at).join(
            s.runtimes, s.runtimes.c.id == s.leases.c.runtime_id, isouter=True)
        with self._reading(conn) as conn:
            return {r.query_id: dict(r._mapping) for r in conn.execute(stmt)}

    def runtimes(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        with self._reading(conn) as conn:
            return [dict(r._mapping) for r in conn.execute(select(s.runtimes).order_by(s.runtimes.c.started_at))]

    # -- runtimes: heartbeats, leases, observed state, progress ------------------------------
    def heartbeat(self, runtime_id: str, pipeline: str, host: str, pid: int,
                  **spark: str | None) -> None:
        """Record that a runtime is alive; the first beat registers it with ``spark``'s
        ``spark_app_id``, ``spark_ui_url`` and ``master``."""
        now = time.time()
        with write_connection(self.engine) as conn:
            done = conn.execute(update(s.runtimes).where(s.runtimes.c.id == runtime_id)
                                .values(heartbeat_at=now)).rowcount
            if not done:
                conn.execute(insert(s.runtimes).values(
                    id=runtime_id, pipeline=pipeline, host=host, pid=pid, started_at=now,
                    heartbeat_at=now, **spark))

    def runtime_stopped(self, runtime_id: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(update(s.runtimes).where(s.runtimes.c.id == runtime_id)
                         .values(stopped_at=time.time()))
            conn.execute(delete(s.leases).where(s.leases.c.runtime_id == runtime_id))

    def acquire_lease(self, query_id: str, runtime_id: str, ttl: float) -> int | None:
        """Take or renew the lease on a query. Returns the epoch held, or None if another
        runtime holds a live lease. A take (not a renewal) increments the epoch."""
        now = time.time()
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.leases).where(s.leases.c.query_id == query_id)).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(s.leases).values(
                            query_id=query_id, runtime_id=runtime_id, epoch=1, expires_at=now + ttl))
                    return 1
                except IntegrityError:
                    return None
            if row.runtime_id == runtime_id:
                epoch = row.epoch
            elif row.expires_at < now:
                epoch = row.epoch + 1
            else:
                return None
            # The WHERE re-checks what was read, so two takers cannot both win.
            done = conn.execute(update(s.leases).where(
                s.leases.c.query_id == query_id, s.leases.c.epoch == row.epoch,
                s.leases.c.runtime_id == row.runtime_id,
            ).values(runtime_id=runtime_id, epoch=epoch, expires_at=now + ttl)).rowcount
            return epoch if done else None

    def renew_lease(self, query_id: str, runtime_id: str, epoch: int, ttl: float) -> bool:
        """Extend a held lease; False means it was lost (expired and taken, or released)."""
        with write_connection(self.engine) as conn:
            return bool(conn.execute(update(s.leases).where(
                s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id,
                s.leases.c.epoch == epoch).values(expires_at=time.time() + ttl)).rowcount)

    def release_lease(self, query_id: str, runtime_id: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(delete(s.leases).where(s.leases.c.query_id == query_id,
                                                s.leases.c.runtime_id == runtime_id))

    def set_observed(self, query_id: str, state: str, error: str | None = None,
                     *, runtime_id: str | None = None, epoch: int | None = None,
                     running_version: int | None = None, run_id: str | None = None) -> bool:
        """Write observed state; with ``runtime_id``/``epoch``, only while that lease is held."""
        with write_connection(self.engine) as conn:
            if runtime_id is not None:
                held = conn.execute(select(s.leases.c.query_id).where(
                    s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id,
                    s.leases.c.epoch == epoch)).first()
                if held is None:
                    return False
            values: dict[str, Any] = {"observed_state": state, "updated_at": time.time()}
            if error is not None or state in ("RUNNING", "PAUSED", "TERMINATED"):
                values["error"] = error
            if running_version is not None:
                values["running_version"] = running_version
            if run_id is not None:
                values["run_id"] = run_id
            conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(**values))
            return True

    def record_progress(self, p: Progress) -> None:
        """Store the latest batch; input and late rows accumulate over new batch ids. The
        last :data:`HISTORY` batches are kept for throughput over time."""
        values = dict(batch_id=p.batch_id, input_rows=p.input_rows,
                      rows_per_second=p.rows_per_second,
                      source_offsets=json.dumps(p.source_offsets), last_batch_at=p.last_batch_at,
                      state_rows=p.state_rows, state_bytes=p.state_bytes,
                      state_operators=json.dumps(p.state_operators))
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.progress).where(s.progress.c.query_id == p.query_id)).first()
            if row is None:
                conn.execute(insert(s.progress).values(
                    query_id=p.query_id, total_input_rows=p.input_rows, late_rows=p.late_rows, **values))
            else:
                new = p.batch_id != row.batch_id
                conn.execute(update(s.progress).where(s.progress.c.query_id == p.query_id).values(
                    total_input_rows=row.total_input_rows + (p.input_rows if new else 0),
                    late_rows=row.late_rows + (p.late_rows if new else 0), **values))
            h = s.progress_history
            # ids above this batch belong to a checkpoint that was rolled back
            conn.execute(delete(h).where(h.c.query_id == p.query_id, or_(
                h.c.batch_id >= p.batch_id, h.c.batch_id <= p.batch_id - HISTORY)))
            conn.execute(insert(h).values(query_id=p.query_id, batch_id=p.batch_id,
                                          at=p.last_batch_at, input_rows=p.input_rows,
                                          rows_per_second=p.rows_per_second))

    def progress_history(self, query_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """The query's last batches, oldest first: batch_id, at, input_rows, rows_per_second."""
        h = s.progress_history
        with self._reading(conn) as conn:
            return [dict(r._mapping) for r in conn.execute(
                select(h.c.batch_id, h.c.at, h.c.input_rows, h.c.rows_per_second)
                .where(h.c.query_id == query_id).order_by(h.c.batch_id))]

    # -- bad records ------------------------------------------------------------------------
    def record_bad_records(self, records: list[BadRecord], conn: Connection | None = None) -> None:
        """Store bad records; one already stored (same query, record and batch) takes the
        new status (a retried batch that fails again holds the query again)."""
        with (self._reading(conn) if conn is not None else write_connection(self.engine)) as conn:
            b = s.bad_records
            for r in records:
                done = conn.execute(update(b).where(
                    b.c.query_id == r.query_id, b.c.record_id == r.record_id, b.c.batch_id == r.batch_id)
                    .values(status=r.status, error=r.error)).rowcount
                if not done:
                    conn.execute(insert(b).values(
                        query_id=r.query_id, record_id=r.record_id, batch_id=r.batch_id,
                        source=r.source, file=r.file, line=r.line, raw=r.raw, error=r.error,
                        status=r.status, recorded_at=r.recorded_at or time.time(),
                        handled_by=r.handled_by, handled_at=r.handled_at))

    def hold_on_bad_records(self, query_id: str, records: list[BadRecord], reason: str, *,
                            runtime_id: str, epoch: int) -> bool:
        """Policy PAUSE: record the bad records and pause the query in one transaction
        (desired and observed PAUSED, ``reason`` as its error), while the lease is held."""
        with write_connection(self.engine) as conn:
            held = conn.execute(select(s.leases.c.query_id).where(
                s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id,
                s.leases.c.epoch == epoch)).first()
            if held is None:
                return False
            self.record_bad_records(records, conn)
            pipeline = conn.execute(select(s.queries.c.pipeline).where(s.queries.c.id == query_id)).scalar()
            conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(
                desired_state="PAUSED", observed_state="PAUSED", error=reason, updated_at=time.time()))
            self.log_command(conn, f"PAUSE {query_id}", pipeline, f"runtime:{runtime_id} (BAD_RECORD)")
            return True

    def bad_records(self, query_id: str | None = None, status: str | None = None,
                    conn: Connection | None = None) -> list[BadRecord]:
        b = s.bad_records
        stmt = select(b).order_by(b.c.id)
        if query_id is not None:
            stmt = stmt.where(b.c.query_id == query_id)
        if status is not None:
            stmt = stmt.where(b.c.status == status)
        with self._reading(conn) as conn:
            return [BadRecord(**{k: v for k, v in r._mapping.items() if k != "id"})
                    for r in conn.execute(stmt)]

    def bad_record_counts(self, conn: Connection | None = None) -> dict[str, dict[str, int]]:
        """query id -> {status: how many bad records}."""
        b = s.bad_records
        with self._reading(conn) as conn:
            counts: dict[str, dict[str, int]] = {}
            for r in conn.execute(select(b.c.query_id, b.c.status, func.count()).group_by(b.c.query_id, b.c.status)):
                counts.setdefault(r[0], {})[r[1]] = r[2]
            return counts

    def mark_bad_records(self, conn: Connection, query_id: str, from_status: str, to_status: str,
                         handled_by: str | None = None, upto_batch: int | None = None) -> int:
        """Move a query's bad records from one status to another; returns how many."""
        b = s.bad_records
        stmt = update(b).where(b.c.query_id == query_id, b.c.status == from_status)
        if upto_batch is not None:
            stmt = stmt.where(b.c.batch_id <= upto_batch)
        values: dict[str, Any] = {"status": to_status}
        if handled_by is not None:
            values.update(handled_by=handled_by, handled_at=time.time())
        return conn.execute(stmt.values(**values)).rowcount
