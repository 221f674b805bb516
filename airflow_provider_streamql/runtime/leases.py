"""The leases a runtime holds on its pipeline's queries, with their epochs (fencing).

A query is run only by the holder of its lease (DESIGN.md section 2). Leases held are
renewed in one write at the start of each pass and, apart from the passes, every quarter
TTL (:meth:`Leases.keep`); one found lost (expired and taken, or released) is remembered
until the query's next look, where the reconciler stops the query and forgets the lease.
Every batch commit checks the lease first (:meth:`Leases.check`): a runtime that lost it
commits nothing more.
"""

from __future__ import annotations

import logging
import threading

from ..catalog import Catalog
from ..errors import StateError

log = logging.getLogger("streamql.runtime")


class Leases:
    """The leases ``runtime_id`` holds, each lasting ``ttl`` seconds without renewal."""

    def __init__(self, catalog: Catalog, runtime_id: str, ttl: float):
        self.catalog, self.runtime_id, self.ttl = catalog, runtime_id, ttl
        #: query id -> the epoch of the lease held on it
        self.epochs: dict[str, int] = {}
        #: query id -> the epoch of a lease found lost (written by the keeper's thread too)
        self._lost: dict[str, int] = {}

    def epoch(self, query_id: str) -> int | None:
        """The epoch held on the query (also while it is lost and not yet forgotten)."""
        return self.epochs.get(query_id)

    def is_lost(self, query_id: str) -> bool:
        """The lease held was found lost (not one released or taken anew since)."""
        epoch = self.epochs.get(query_id)
        return epoch is not None and self._lost.get(query_id) == epoch

    def owns(self, query_id: str) -> bool:
        """A query is this runtime's from the moment it holds its lease: its first batch may
        report progress before its start returns."""
        return query_id in self.epochs

    def renew(self) -> None:
        """Renew every lease held, in one write; remember the lost ones."""
        self._lost.update(self.catalog.leases.renew_all(self.runtime_id, dict(self.epochs), self.ttl))

    def keep(self, stopping: threading.Event) -> None:
        """Renew the leases every quarter TTL until ``stopping``, apart from the reconcile
        passes: a pass that starts many queries on a busy machine may outlast the TTL, and a
        lease must not expire (and its query start elsewhere) while it runs here."""
        while not stopping.wait(self.ttl / 4):
            try:
                self.renew()
            except Exception:
                log.exception("renewing leases failed; retrying")

    def acquire(self, query_id: str) -> int | None:
        """Take the query's lease: its epoch, or None if another runtime holds it."""
        epoch = self.catalog.leases.acquire(query_id, self.runtime_id, self.ttl)
        if epoch is not None:
            self.epochs[query_id] = epoch
            self._lost.pop(query_id, None)
        return epoch

    def release(self, query_id: str) -> None:
        self.catalog.leases.release(query_id, self.runtime_id)
        self.forget(query_id)

    def forget(self, query_id: str) -> None:
        """Drop a lease from the book (lost, or released)."""
        self.epochs.pop(query_id, None)
        self._lost.pop(query_id, None)

    def check(self, query_id: str, epoch: int) -> None:
        """The fence a batch passes before it commits: the lease is still held at ``epoch``."""
        if not self.catalog.leases.renew(query_id, self.runtime_id, epoch, self.ttl):
            raise StateError(f"runtime {self.runtime_id} lost the lease on {query_id} (epoch {epoch}); not committing")
