"""The command log: every statement that changed desired state, in order, with the pipeline
and who issued it (the role ksqlDB gives its command topic). A runtime watches its newest
number to act at once (on PostgreSQL each statement is also announced with NOTIFY, so a
runtime need not read to know); a runtime's own pause of a query at a bad record is logged as
a PAUSE it issued (:data:`~.model.HOLD_ISSUER`)."""

from __future__ import annotations

import math
import time
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, text

from . import schema as s
from .connections import reading
from .model import HOLD_ISSUER

_NEWEST = select(func.max(s.commands.c.seq))  # built once: a runtime reads it every few ms
#: PostgreSQL: the channel each logged statement is announced on (NOTIFY, delivered at commit)
CHANNEL = "streamql_statements"
_LISTEN = text(f"LISTEN {CHANNEL}")  # a constant: no user text reaches it
#: PostgreSQL: seconds a held look trusts the absence of an announcement before reading anyway
REREAD = 1.0


def newest(conn: Connection) -> int:
    """The newest statement's number on ``conn`` (0 if none)."""
    return conn.execute(_NEWEST).scalar() or 0


class CommandLog:
    """The ordered log of applied statements. Pass ``conn`` to read inside an open transaction."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def log(self, conn: Connection, statement: str, pipeline: str, issuer: str) -> int:
        """Append ``statement`` in the transaction of ``conn``; its number in the log."""
        result = conn.execute(
            insert(s.commands).values(statement=statement, pipeline=pipeline, issuer=issuer, issued_at=time.time())
        )
        key = result.inserted_primary_key
        assert key is not None  # one row inserted: its key
        if conn.dialect.name == "postgresql":  # told to listening runtimes if, and when, it commits
            conn.execute(select(func.pg_notify(CHANNEL, "")))
        return key[0]

    def all(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every logged statement, oldest first."""
        with reading(self.engine, conn) as conn:
            return [dict(r._mapping) for r in conn.execute(select(s.commands).order_by(s.commands.c.seq))]

    def last(self) -> int:
        """The number of the newest statement logged (0 if none): it changes whenever a
        statement changes desired state."""
        with reading(self.engine, None) as conn:
            return newest(conn)

    def watch(self, *, reread: float = REREAD) -> LastCommandWatch:
        """:meth:`last`, for a caller that asks every few milliseconds (a runtime between
        its passes, to act on a statement at once): see :class:`LastCommandWatch`."""
        return LastCommandWatch(self.engine, reread=reread)

    def last_hold(self, query_id: str) -> int | None:
        """The number of the runtime's last PAUSE of ``query_id`` at a bad record (policy
        PAUSE), None if it never held it: one per hold."""
        c = s.commands
        holds = c.c.issuer.like(HOLD_ISSUER.format(runtime_id="%"))
        with reading(self.engine, None) as conn:
            return conn.execute(select(func.max(c.c.seq)).where(c.c.statement == f"PAUSE {query_id}", holds)).scalar()


class LastCommandWatch:
    """The newest statement's number, read on one connection held between reads instead of
    one taken from the pool for each: a runtime looks for a new statement every few
    milliseconds while it waits for its next pass, and on SQLite a read this way takes
    about 25 µs against 60-80 µs. Each read ends its transaction, so the next one sees every
    statement committed meanwhile (a read transaction left open would keep SQLite's WAL
    snapshot, and PostgreSQL's session idle in it). A read that fails lets the connection
    go; the next opens another. Used by one thread of the process that made it (the held
    connection is not the pool's to hand to a forked child).

    On PostgreSQL through psycopg the connection also LISTENs on :data:`CHANNEL`, where every
    logged statement is announced at its commit: :meth:`newer_than` then asks the connection
    whether an announcement came, without a round trip, and reads only once one came or
    ``reread`` seconds after the last read. The read after a while covers statements nobody
    announced: written by an older streamql during an upgrade, through a pooler in
    transaction mode (PgBouncer's has no LISTEN), or by hand. The connection is detached
    from the pool: one that listens is never handed to anything else, and closing it ends
    its session."""

    def __init__(self, engine: Engine, *, reread: float = REREAD):
        self.engine = engine
        dialect = engine.dialect
        #: statements are announced to this look's connection (psycopg's notifies())
        self.listens = dialect.name == "postgresql" and dialect.driver == "psycopg"
        #: a look costs no round trip to a server: a read of a local file, or a look for an announcement
        self.local = self.listens or dialect.name == "sqlite"
        self.reread = reread
        self._conn: Connection | None = None
        self._read_at = -math.inf

    def last(self) -> int:
        """The newest statement's number, read now. A listening connection begins listening
        before its first read (nothing committed after the read goes unannounced), and
        takes what was announced before each read (the read sees it)."""
        try:
            if self._conn is None:
                self._conn = self.engine.connect()
                self._conn.detach()
                if self.listens:
                    self._conn.execute(_LISTEN)
                    self._conn.commit()  # LISTEN takes effect at commit
            elif self.listens:
                self._announcements()
            number = newest(self._conn)
            self._conn.rollback()
        except Exception:
            self.close()
            raise
        self._read_at = time.monotonic()
        return number

    def newer_than(self, seen: int) -> bool:
        """Whether a statement was logged after statement number ``seen`` (a :meth:`last`):
        a read, except on a listening connection while nothing was announced since the
        last read (no more than ``reread`` seconds ago). A session the server ended raises
        the driver's error (psycopg's ``OperationalError``); the next look opens another."""
        fresh = time.monotonic() - self._read_at < self.reread
        if self.listens and self._conn is not None and fresh and not self._announcements():
            return False
        return self.last() != seen

    def _announcements(self) -> int:
        """How many announcements came since the last look, taken off the connection (which
        is let go if that fails, as after a failed read)."""
        assert self._conn is not None
        try:
            listening = self._conn.connection.dbapi_connection  # psycopg's own (detached: no pool record)
            assert listening is not None  # a connection held open has its driver's
            return len(list(listening.notifies(timeout=0)))
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a connection that failed may fail to close too: it is let go either way
                pass
