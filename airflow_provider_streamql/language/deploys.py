"""The statements of headless deploys: recording an applied deploy file, and rolling a whole
deploy back. No text parses into them: the engine builds them from checked parts
(``Engine.apply`` appends a :class:`RecordDeploy` to the file's changes, ``Engine.rollback``
makes a :class:`RollbackDeploy`), and the planner plans them as it plans any statement, in
the same transaction as what they record or undo."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ParseError
from .names import check_object_name
from .statements import MAX_COUNT, Statement

FINGERPRINT = re.compile(r"[0-9a-f]{64}")


@dataclass
class RecordDeploy(Statement):
    """Record the deploy whose changes the script's other statements make: the queries they
    create or upgrade (the versions before and after), each upgraded query's checkpoint
    snapshotted first."""

    fingerprint: str
    #: the digest of the catalog the deploy was planned (and approved) against: refused if the
    #: catalog is no longer so when the deploy is applied (None: not checked)
    catalog_state: str | None = None

    @classmethod
    def of(cls, fingerprint: str, *, catalog_state: str | None = None) -> RecordDeploy:
        for value in (fingerprint, catalog_state):
            if value is not None and (not isinstance(value, str) or not FINGERPRINT.fullmatch(value)):
                raise ParseError(f"a fingerprint is a sha256 in hex, not {value!r}")
        return cls(fingerprint=fingerprint, catalog_state=catalog_state, text=f"-- deploy of file {fingerprint[:12]}")


@dataclass
class RollbackDeploy(Statement):
    """Return every query deploy ``deploy`` changed to the version and snapshot it had
    before (None: the pipeline's newest deploy not rolled back yet). ``resume``: the queries
    paused for the rollback, which run again after it."""

    deploy: int | None
    resume: tuple[str, ...] = ()

    @classmethod
    def of(cls, deploy: int | None, *, resume: tuple[str, ...] = ()) -> RollbackDeploy:
        if deploy is not None and (
            isinstance(deploy, bool) or not isinstance(deploy, int) or not 1 <= deploy <= MAX_COUNT
        ):
            raise ParseError(f"a deploy is a whole number from 1 to {MAX_COUNT}, not {deploy!r}")
        resume = tuple(check_object_name(q, "query ID") for q in resume)
        return cls(deploy=deploy, resume=resume, text=f"-- rollback of deploy {deploy or 'last'}")
