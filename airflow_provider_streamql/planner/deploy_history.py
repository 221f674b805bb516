"""The history of deploys: each apply of a deploy file recorded with what it changed, and a
whole deploy rolled back in one step.

An apply that changes something ends with a :class:`~..language.deploys.RecordDeploy`: in the
same transaction as the file's changes it records the deploy (its file's fingerprint, issuer,
time) and, for each query of the pipeline the file created or upgraded, the version before and
after. Each upgraded query's checkpoint is snapshotted first (a ``DEPLOY`` snapshot, taken as
``SNAPSHOT`` takes one), and so is each unchanged query reading what an upgraded one writes
(a *reader*, directly or through others), downstream first, so that a rollback can bring the
state of all of them back to one moment.

:class:`~..language.deploys.RollbackDeploy` returns every query the deploy upgraded to the
version it had before and to the deploy's snapshot, and every reader to its snapshot (as
``RESTORE`` does: the output of the batches after it is taken out and kept, so they run again
and each input record is in each output once: a reader reads the old version's output anew),
and terminates every query the deploy created (its output is kept). All or nothing: if any
change cannot be undone (:meth:`DeployStatements.rollback_plan` names each reason) nothing
changes. Restoring needs the queries paused; ``Engine.rollback`` pauses them first and resumes
them with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from ..catalog import CheckpointSnapshot, QueryInfo
from ..catalog.deploys import Deploy, DeployAction, DeployChange
from ..catalog.states import DesiredState, QueryState
from ..errors import NotFoundError, StateError
from ..language import statements as st
from ..language.deploys import RecordDeploy, RollbackDeploy
from ..results import Result
from ..storage.checkpoints import last_committed_batch
from ..storage.layout import snapshot_folder
from .impact import catalog_state
from .planning import Planning
from .snapshots import SnapshotStatements
from .step import Step

#: the states in which a query's checkpoint is not being written (RESTORE's own condition)
AT_REST = (QueryState.PAUSED, QueryState.PENDING, QueryState.UNASSIGNED)
#: columns of what a deploy's record and its rollback show, a row per query
CHANGE_COLUMNS = ["query_id", "action", "version_before", "version_after", "snapshot"]


@dataclass(frozen=True)
class Undo:
    """How rolling back one change of a deploy returns its query."""

    change: DeployChange
    query: QueryInfo
    #: the snapshot to restore (None: the query has committed no batch: no state to return)
    snapshot: CheckpointSnapshot | None = None


@dataclass(frozen=True)
class RollbackPlan:
    """What rolling back ``deploy`` does: the queries it restores (those the deploy upgraded,
    back to their version before, and their readers) and the queries it created, which it
    terminates (those not terminated already)."""

    deploy: Deploy
    restored: tuple[Undo, ...]
    created: tuple[QueryInfo, ...]

    @property
    def running(self) -> list[str]:
        """The queries to restore that should run now: paused for the rollback, then resumed."""
        return [u.query.id for u in self.restored if u.query.desired_state == DesiredState.RUNNING]


class DeployStatements:
    """RecordDeploy and RollbackDeploy, planned in ``planning``; snapshots are taken and
    restored through ``snapshots``."""

    def __init__(self, planning: Planning, snapshots: SnapshotStatements):
        self.planning = planning
        self.snapshots = snapshots

    # -- recording ---------------------------------------------------------------------
    def record_deploy(self, stmt: RecordDeploy) -> Step:
        """Planned after the file's statements: the planning snapshot holds the queries as
        the deploy leaves them, the catalog (not written yet) as it found them."""
        planning = self.planning
        if (
            stmt.catalog_state is not None
            and catalog_state(planning.catalog.snapshot(planning.conn)) != stmt.catalog_state
        ):
            # read in the apply's own transaction: nothing can change it between this and the commit
            raise StateError("nothing applied: the catalog changed since the deploy was planned; plan it again")
        before = {q.id: q for q in planning.catalog.queries(planning.pipeline, planning.conn)}
        changes: list[DeployChange] = []
        queries = sorted(
            (q for q in planning.snapshot.queries.values() if q.pipeline == planning.pipeline), key=lambda q: q.seq
        )
        for q in queries:
            old = before.get(q.id)
            if old is None:
                changes.append(DeployChange(q.id, DeployAction.CREATED, None, q.version))
            elif old.version != q.version:
                changes.append(DeployChange(q.id, DeployAction.UPGRADED, old.version, q.version))
        changes += _readers(queries, before, changes)
        snapshots: dict[str, tuple[Step, list[CheckpointSnapshot]]] = {}
        # downstream first: what a reader's snapshot holds was written before its writer's
        for c in sorted(changes, key=lambda c: -before[c.query_id].seq if c.query_id in before else 0):
            old = before.get(c.query_id)
            if old is None:
                continue
            batch = last_committed_batch(old.checkpoint)
            # between two versions, the runtime's own UPGRADE snapshot is the one a
            # rollback needs; then this deploy takes none (and its rollback says so)
            between = old.observed_state in (QueryState.UPGRADING, QueryState.ROLLING_BACK)
            if batch >= 0 and not between and old.id not in planning.snapshotted:
                snapshots[old.id] = self.snapshots.snapshot_step(old, batch, stmt, kind="DEPLOY")
        steps = [step for step, _taken in snapshots.values()]
        recorded: list[int] = []
        numbered: list[DeployChange] = []

        def write(conn: Connection) -> None:
            for step in steps:
                assert step.write is not None
                step.write(conn)
            numbered.extend(
                replace(c, snapshot=snapshots[c.query_id][1][0].number) if c.query_id in snapshots else c
                for c in changes
            )
            recorded.append(
                planning.catalog.deploys.add(conn, planning.pipeline, stmt.fingerprint, planning.issuer, numbered)
            )

        def after_commit(result: Result) -> None:
            for step in steps:
                if step.after_commit:
                    step.after_commit(step.result)
            result.message = f"Deploy {recorded[0]} recorded: " + (
                "; ".join(map(_said, numbered)) or "no query changed"
            )
            result.columns, result.rows = CHANGE_COLUMNS, [_row(c) for c in numbered]
            result.details = {"deploy": recorded[0], "fingerprint": stmt.fingerprint}

        return Step(Result(stmt.text), write=write, files=_all_files(steps), after_commit=after_commit)

    # -- rolling back ------------------------------------------------------------------
    def rollback_plan(self, deploy_id: int | None, *, at_rest: bool = False) -> RollbackPlan:
        """What rolling back deploy ``deploy_id`` (None: the pipeline's newest one not rolled
        back) does; :class:`StateError` naming every query whose change cannot be undone (and
        why), or the deploy that cannot be rolled back. With ``at_rest``, every query to
        restore must be paused already (the rollback itself; its check before pauses them)."""
        deploy = self._deploy(deploy_id)
        queries = self.planning.snapshot.queries
        problems: list[str] = []
        restored: list[Undo] = []
        created: list[QueryInfo] = []
        for change in deploy.changes:
            query = queries.get(change.query_id)
            if query is None:
                problems.append(f"{change.query_id} is gone from the catalog")
                continue
            try:
                if change.action is DeployAction.CREATED:
                    if self._check_created(deploy, change, query):
                        created.append(query)
                else:  # UPGRADED, READER
                    restored.append(self._check_upgraded(deploy, change, query, at_rest))
            except StateError as e:
                problems.append(e.message)
        if problems:
            raise StateError(f"deploy {deploy.id} cannot be rolled back: " + "; ".join(problems))
        return RollbackPlan(deploy, tuple(restored), tuple(created))

    def rollback_deploy(self, stmt: RollbackDeploy) -> Step:
        plan = self.rollback_plan(stmt.deploy, at_rest=True)
        planning, deploy = self.planning, plan.deploy
        restores = [
            self.snapshots.restore(st.RestoreQuery.of(u.query.id, u.snapshot.number))
            for u in plan.restored
            if u.snapshot is not None
        ]
        resume = [q for q in stmt.resume if q in {u.query.id for u in plan.restored}]
        for u in plan.restored:  # the rest of the script sees them as the rollback leaves them
            queries = planning.snapshot.queries
            queries[u.query.id] = replace(
                u.query,
                version=u.change.version_before or u.query.version,
                desired_state=DesiredState.RUNNING if u.query.id in resume else u.query.desired_state,
            )
        for q in plan.created:
            planning.snapshot.queries[q.id] = replace(q, desired_state=DesiredState.TERMINATED)

        def write(conn: Connection) -> None:
            for step in restores:
                assert step.write is not None
                step.write(conn)
            for u in plan.restored:
                if u.change.action is not DeployAction.UPGRADED:
                    continue
                assert u.change.version_before is not None
                planning.catalog.revert_version(
                    conn,
                    u.query.id,
                    u.change.version_before,
                    u.change.version_after,
                    f"rolled back with deploy {deploy.id}",
                )
            for query_id in resume:
                planning.catalog.set_desired(conn, query_id, DesiredState.RUNNING)
            for q in plan.created:
                planning.catalog.set_desired(conn, q.id, DesiredState.TERMINATED)
            planning.catalog.deploys.mark_rolled_back(conn, deploy.id, planning.issuer)

        result = Result(stmt.text)
        waits = [(q, QueryState.RUNNING.value) for q in resume] + [
            (q.id, QueryState.TERMINATED.value) for q in plan.created
        ]
        result.waits = waits

        def after_commit(result: Result) -> None:
            for step in restores:
                if step.after_commit:
                    step.after_commit(step.result)
            done = [
                (
                    f"{u.query.id} back to version {u.change.version_before}"
                    if u.change.action is DeployAction.UPGRADED
                    else f"{u.query.id} (a reader) back"
                )
                + (f" and snapshot {u.snapshot.number}" if u.snapshot else " (no batch committed: no state)")
                for u in plan.restored
            ] + [f"{q.id} terminated (created by it; its output {q.sink} is kept)" for q in plan.created]
            result.message = f"Rolled back deploy {deploy.id}: " + ("; ".join(done) or "nothing left to undo")
            result.columns, result.rows = CHANGE_COLUMNS, [_row(c) for c in deploy.changes]
            result.details = {
                "deploy": deploy.id,
                "restored": {u.query.id: u.change.version_before for u in plan.restored},
                "terminated": [q.id for q in plan.created],
                "outputs": [step.result.message for step in restores],
            }

        return Step(result, write=write, files=_all_files(restores), after_commit=after_commit)

    def _deploy(self, deploy_id: int | None) -> Deploy:
        records = self.planning.catalog.deploys
        if deploy_id is None:
            live = [d for d in records.of(self.planning.pipeline, self.planning.conn) if not d.rolled_back]
            if not live:
                raise StateError(f"pipeline {self.planning.pipeline!r} has no deploy to roll back")
            return live[-1]
        deploy = records.get(deploy_id, self.planning.conn)
        if deploy is None:
            raise NotFoundError(f"there is no deploy {deploy_id!r} (streamql deploys lists them)")
        if deploy.rolled_back:
            raise StateError(f"deploy {deploy.id} was rolled back already (by {deploy.rolled_back_by})")
        return deploy

    def _check_created(self, deploy: Deploy, change: DeployChange, query: QueryInfo) -> bool:
        """Whether the query the deploy created is still to be terminated; StateError if a
        change since stands on it."""
        if query.desired_state == DesiredState.TERMINATED:
            return False
        if query.version != change.version_after:
            raise StateError(
                f"{query.id} runs version {query.version} since deploy {deploy.id} created it "
                f"(version {change.version_after}): roll back the newer change first"
            )
        ours = {c.query_id for c in deploy.changes}
        readers = sorted(
            q.id
            for q in self.planning.snapshot.queries.values()
            if query.sink in q.sources and q.id not in ours and q.desired_state != DesiredState.TERMINATED
        )
        if readers:
            raise StateError(
                f"{query.id}, created by deploy {deploy.id}, writes {query.sink}, which {', '.join(readers)} "
                f"(created since) reads: terminate or roll back {', '.join(readers)} first"
            )
        return True

    def _check_upgraded(self, deploy: Deploy, change: DeployChange, query: QueryInfo, at_rest: bool) -> Undo:
        if query.desired_state == DesiredState.TERMINATED:
            raise StateError(f"{query.id} was terminated since deploy {deploy.id}")
        if query.version != change.version_after:
            raise StateError(
                f"{query.id} runs version {query.version} since deploy {deploy.id} made version "
                f"{change.version_after}: roll back the newer change first"
            )
        assert change.version_before is not None
        versions = {v["version"]: v for v in self.planning.catalog.versions(query.id, self.planning.conn)}
        old = versions.get(change.version_before)
        if old is None:
            raise StateError(f"version {change.version_before} of {query.id} is gone from the catalog")
        gone = [s for s in json.loads(old["sources"]) if s not in self.planning.snapshot.sources]
        if gone:
            raise StateError(
                f"version {change.version_before} of {query.id} reads {', '.join(gone)}, "
                f"dropped since deploy {deploy.id}"
            )
        if at_rest and query.observed_state not in AT_REST:
            raise StateError(
                f"{query.id} is {query.observed_state}: it must be PAUSED for its checkpoint to be restored"
            )
        if change.snapshot is None:
            if last_committed_batch(query.checkpoint) >= 0:
                raise StateError(
                    f"deploy {deploy.id} took no snapshot of {query.id} (it had committed no batch, or was between "
                    f"two versions) and version {change.version_after} has committed batches since: its state "
                    f"cannot be returned"
                )
            return Undo(change, query)
        snaps = {s.number: s for s in self.planning.catalog.snapshots.of(query.id, self.planning.conn)}
        snap = snaps.get(change.snapshot)
        if snap is None or not os.path.isdir(snapshot_folder(query.checkpoint, snap.folder)):
            raise StateError(
                f"snapshot {change.snapshot} of {query.id}, taken by deploy {deploy.id}, is gone (dropped by the "
                f"retention policy of a later SNAPSHOT, or by a RESTORE to an earlier one)"
            )
        return Undo(change, query, snap)


def _all_files(steps: list[Step]) -> Callable[[], Callable[[], None]] | None:
    """The file effects of ``steps`` as one, undoing those done if a later one fails."""
    if not any(step.files for step in steps):
        return None

    def files() -> Callable[[], None]:
        undos: list[Callable[[], None]] = []
        try:
            for step in steps:
                undos.append(step.run_files())
        except BaseException:
            for undo in reversed(undos):
                undo()
            raise

        def undo_all() -> None:
            for undo in reversed(undos):
                undo()

        return undo_all

    return files


def _readers(queries: list[QueryInfo], before: dict[str, QueryInfo], changes: list[DeployChange]) -> list[DeployChange]:
    """The live queries the deploy left unchanged that read, directly or through each other,
    what a query it upgraded writes."""
    upgraded = {c.query_id for c in changes if c.action is DeployAction.UPGRADED}
    changed = {c.query_id for c in changes}
    outputs = {q.sink for q in queries if q.id in upgraded}
    readers: list[DeployChange] = []
    grew = True
    while grew:  # to a fixed point: readers of readers
        grew = False
        for q in queries:
            if q.id in changed or q.desired_state == DesiredState.TERMINATED or not outputs & set(q.sources):
                continue
            readers.append(DeployChange(q.id, DeployAction.READER, before[q.id].version, q.version))
            changed.add(q.id)
            outputs.add(q.sink)
            grew = True
    return readers


def _said(c: DeployChange) -> str:
    if c.action is DeployAction.CREATED:
        return f"{c.query_id} created (version {c.version_after})"
    if c.action is DeployAction.READER:
        snap = f"snapshot {c.snapshot} taken" if c.snapshot else "no snapshot (no batch committed)"
        return f"{c.query_id} reads what an upgraded query writes: {snap}"
    snap = f", snapshot {c.snapshot} taken before" if c.snapshot else ", no snapshot (no batch committed)"
    return f"{c.query_id} version {c.version_before} -> {c.version_after}{snap}"


def _row(c: DeployChange) -> list:
    return [c.query_id, c.action.value, c.version_before, c.version_after, c.snapshot]
