"""Snapshots and rewinds: ``SNAPSHOT <query_id> [WITH (keep, max_age_hours)]`` and
``RESTORE <query_id> TO SNAPSHOT <n>``.

A snapshot is a copy of the query's checkpoint as of its last committed batch
(:mod:`..storage.snapshots`), recorded in the catalog with the version that wrote it, the batch
and the input position. RESTORE puts a paused query's checkpoint back to a snapshot and removes
what the query wrote to its sink for later batches, so those batches run again and the output
holds each input record once (a Kafka sink is written at least once: it gets them again).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..catalog import CheckpointSnapshot, QueryInfo
from ..catalog.states import DesiredState, QueryState
from ..language import statements as st
from ..language.starting import timestamp_text
from ..results import Result
from ..storage.checkpoints import last_committed_batch, source_positions
from ..storage.kafka_topics import offsets_for_time
from ..storage.layout import MovedAside, Part, snapshot_folder, snapshot_output
from ..storage.rewinds import cut_at, forget_file_sources, holds_state, kafka_topics_read
from ..storage.snapshots import copy_committed
from ..storage.topics import SINK_LOG
from ..views.rows import SNAPSHOT_COLUMNS, snapshot_row
from .output_swap import OutputSwap
from .planning import Planning, state_error_at
from .step import Step

#: the retention policy when a SNAPSHOT gives none (Flink's operator keeps savepoints by
#: count and age in the same way)
DEFAULT_KEEP = 10
DEFAULT_MAX_AGE_HOURS = 24.0 * 7


def expired(snaps: list[CheckpointSnapshot], keep: int, max_age_hours: float, now: float) -> list[CheckpointSnapshot]:
    """The snapshots the policy drops: all but the newest ``keep``, and any older than
    ``max_age_hours``; never the newest one, nor the newest UPGRADE one (a rollback of the
    current version restores it)."""
    newest_first = sorted(snaps, key=lambda s: s.number, reverse=True)
    upgrades = [s for s in newest_first if s.kind == "UPGRADE"]
    spared = {newest_first[0].number} | ({upgrades[0].number} if upgrades else set()) if snaps else set()
    return [
        s
        for rank, s in enumerate(newest_first)
        if s.number not in spared and (rank >= keep or now - s.taken_at > max_age_hours * 3600)
    ]


@dataclass(frozen=True)
class Rewind:
    """Where a RESTORE puts a checkpoint back: after ``batch``, the output after
    ``output_after`` (None: ``batch``) the query's own; ``put_back`` writes the checkpoint
    (given the kept copy of the one it replaces), ``shown`` says where in the message, and
    ``snapshot`` is the snapshot restored (None: a rewind to a time)."""

    batch: int
    output_after: int | None
    put_back: Callable[[str], object]
    shown: str
    snapshot: CheckpointSnapshot | None


class SnapshotStatements:
    """SNAPSHOT and RESTORE, planned in ``planning``."""

    def __init__(self, planning: Planning):
        self.planning = planning

    def _query_for(self, query_id: str, stmt: st.Statement) -> QueryInfo:
        query = self.planning.query_named(query_id, stmt)
        if query.desired_state == DesiredState.TERMINATED:
            raise state_error_at(f"query {query.id} is terminated; its checkpoint is no longer kept", stmt)
        return query

    def _once_per_script(self, query: QueryInfo, stmt: st.Statement) -> None:
        """A script takes one SNAPSHOT or RESTORE of a query: each is planned against the
        checkpoint as it is before the script, and applied after every check."""
        if query.id in self.planning.snapshotted:
            raise state_error_at(
                f"{query.id} is already snapshotted or restored by this script; run one at a time", stmt
            )
        self.planning.snapshotted.add(query.id)

    def take_snapshot(self, stmt: st.TakeSnapshot) -> Step:
        query = self._query_for(stmt.query_id, stmt)
        self._once_per_script(query, stmt)
        if query.observed_state in (QueryState.UPGRADING, QueryState.ROLLING_BACK):
            raise state_error_at(
                f"query {query.id} is {query.observed_state}: take the snapshot once it runs one version", stmt
            )
        batch = last_committed_batch(query.checkpoint)
        if batch < 0:
            raise state_error_at(f"query {query.id} has committed no batch yet: there is nothing to snapshot", stmt)
        return self.snapshot_step(query, batch, stmt, kind="MANUAL", keep=stmt.keep, max_age_hours=stmt.max_age_hours)[
            0
        ]

    def snapshot_step(
        self,
        query: QueryInfo,
        batch: int,
        stmt: st.Statement,
        *,
        kind: str,
        keep: int | None = None,
        max_age_hours: float | None = None,
    ) -> tuple[Step, list[CheckpointSnapshot]]:
        """The step that copies ``query``'s checkpoint as of committed ``batch`` (checked by
        the caller) and drops what the retention policy drops; and the list the snapshot's
        record is in once the step's write ran (a deploy records its number)."""
        keep = keep or DEFAULT_KEEP
        max_age = max_age_hours or DEFAULT_MAX_AGE_HOURS
        taken: list[CheckpointSnapshot] = []
        dropped: list[CheckpointSnapshot] = []
        moved: list[MovedAside] = []

        def write(conn) -> None:
            snap = self.planning.catalog.snapshots.add(self._record(query, kind, batch), conn)
            taken.append(snap)
            dropped.extend(expired(self.planning.catalog.snapshots.of(query.id, conn), keep, max_age, time.time()))
            if dropped:
                self.planning.catalog.snapshots.remove(query.id, [s.number for s in dropped], conn)

        def files() -> Callable[[], None]:
            target = snapshot_folder(query.checkpoint, taken[0].folder)
            copy_committed(query.checkpoint, target, batch=batch)  # leaves nothing if it fails
            try:
                moved.append(MovedAside(_folders(query.checkpoint, dropped)))  # undoes itself if it fails
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise

            def undo() -> None:
                shutil.rmtree(target, ignore_errors=True)
                moved[0].restore()

            return undo

        result = Result(stmt.text, query_id=query.id)

        def after_commit(result: Result) -> None:
            moved[0].purge()
            snap = taken[0]
            result.message = f"Snapshot {snap.number} of {query.id}: batch {snap.batch_id}, version {snap.version}" + (
                f"; removed snapshot(s) {', '.join(str(s.number) for s in dropped)} (keep {keep}, "
                f"max_age_hours {max_age:g})"
                if dropped
                else ""
            )
            result.columns, result.rows = SNAPSHOT_COLUMNS, [snapshot_row(snap)]

        return Step(result, write=write, files=files, after_commit=after_commit), taken

    def _paused(self, stmt: st.RestoreQuery | st.RestoreToTime) -> QueryInfo:
        """The query a RESTORE names, which must be paused (once per script)."""
        query = self._query_for(stmt.query_id, stmt)
        if query.desired_state != DesiredState.PAUSED or query.observed_state not in (
            QueryState.PAUSED,
            QueryState.PENDING,
            QueryState.UNASSIGNED,
        ):
            raise state_error_at(
                f"query {query.id} is {query.observed_state} (desired {query.desired_state}): PAUSE it and wait "
                f"until it is PAUSED before RESTORE; a running query keeps writing its checkpoint",
                stmt,
            )
        self._once_per_script(query, stmt)
        return query

    def restore(self, stmt: st.RestoreQuery) -> Step:
        query = self._paused(stmt)
        snaps = {s.number: s for s in self.planning.catalog.snapshots.of(query.id, self.planning.conn)}
        snap = snaps.get(stmt.number)
        if snap is None:
            have = ", ".join(map(str, snaps)) or "none"
            raise state_error_at(f"query {query.id} has no snapshot {stmt.number} (its snapshots: {have})", stmt)
        source = snapshot_folder(query.checkpoint, snap.folder)
        if not os.path.isdir(source):
            raise state_error_at(f"the files of snapshot {snap.number} of {query.id} are gone ({source!r})", stmt)
        self._check_versions(query, snap, stmt)
        rewind = Rewind(
            snap.batch_id,
            snap.output_after,
            lambda kept: shutil.copytree(source, query.checkpoint, ignore=Part(source).guard),  # no link out
            f"snapshot {snap.number} (batch {snap.batch_id}, version {snap.version})",
            snap,
        )
        return self._rewind(query, stmt, rewind, snaps)

    def restore_to_time(self, stmt: st.RestoreToTime) -> Step:
        query = self._paused(stmt)
        when = timestamp_text(stmt.timestamp_ms)
        if stmt.timestamp_ms > time.time() * 1000:
            raise state_error_at(f"{when} is in the future: a query can be rewound to a time it has read past", stmt)
        offsets = None
        if topics := kafka_topics_read(query.checkpoint):  # where each partition reaches the time
            what = f"RESTORE {query.id} TO TIMESTAMP (Kafka's offsets for a time of {', '.join(topics)})"
            settings = self.planning.kafka_settings(what, stmt)
            offsets = {t: offsets_for_time(settings, t, stmt.timestamp_ms) for t in topics}
        cut = cut_at(query.checkpoint, stmt.timestamp_ms, offsets)
        snaps = {s.number: s for s in self.planning.catalog.snapshots.of(query.id, self.planning.conn)}
        if cut.first_batch is None:
            return Step(
                Result(
                    stmt.text,
                    f"Nothing to rewind: every batch {query.id} committed read input from before {when}; "
                    f"it resumes where it stopped",
                    query_id=query.id,
                )
            )
        if holds_state(query.checkpoint):
            earlier = sorted((s for s in snaps.values() if s.batch_id <= cut.batch), key=lambda s: s.batch_id)
            use = (
                f"snapshot {earlier[-1].number} (batch {earlier[-1].batch_id}) is the nearest before it: RESTORE "
                f"{query.id} TO SNAPSHOT {earlier[-1].number} runs every later batch again, the same output"
                if earlier
                else "no snapshot is that old: take SNAPSHOTs on a schedule to rewind a stateful query"
            )
            raise state_error_at(
                f"{query.id} keeps state (an aggregation, a deduplication or a join): a rewind to {when} (after "
                f"batch {cut.batch}) needs its state as of that batch, which its checkpoint does not keep; {use}",
                stmt,
            )
        before = (
            f"; {when} is before its first input ({timestamp_text(cut.earliest_ms)}): every batch runs again"
            if cut.earliest_ms is not None and stmt.timestamp_ms <= cut.earliest_ms
            else ""
        )

        def cut_checkpoint(kept: str) -> None:
            copy_committed(kept, query.checkpoint, batch=cut.batch)  # the checkpoint as it was then
            if cut.batch < 0:
                forget_file_sources(query.checkpoint)

        rewind = Rewind(cut.batch, None, cut_checkpoint, f"{when} (after batch {cut.batch}){before}", None)
        return self._rewind(query, stmt, rewind, snaps)

    def _rewind(
        self,
        query: QueryInfo,
        stmt: st.RestoreQuery | st.RestoreToTime,
        rewind: Rewind,
        snaps: dict[int, CheckpointSnapshot],
    ) -> Step:
        """Put ``query``'s checkpoint back to ``rewind``'s batch and take what later batches
        wrote out of its output (kept with the RESTORE snapshot taken of the checkpoint it
        replaces), so they run again and the output holds each input record once."""
        snap = rewind.snapshot
        sink = self.planning.snapshot.sources.get(query.sink)
        on_kafka = bool(sink and sink.kafka_topic)
        if sink is not None and not on_kafka and os.path.isdir(os.path.join(sink.path, SINK_LOG)):
            raise state_error_at(
                f"{sink.name} is written by Spark's file sink, whose log would skip the batches a "
                f"restore runs again: RESTORE needs an output created by this streamql",
                stmt,
            )
        current = last_committed_batch(query.checkpoint)
        # output of batches after ``cut`` belongs to the timeline the restore leaves; a
        # RESTORE snapshot brings back the output of its own timeline after its cut
        cut = rewind.output_after if rewind.output_after is not None else rewind.batch
        # snapshots of later batches belong to the run the restore leaves; restoring a RESTORE
        # snapshot also leaves the run that began at its cut (the snapshots taken after it)
        abandoned = [
            s
            for s in snaps.values()
            if (snap is None or s.number != snap.number)
            and (
                s.batch_id > rewind.batch
                or (snap is not None and snap.output_after is not None and s.number > snap.number and s.batch_id > cut)
            )
        ]
        self._keep_rollback(query, abandoned, stmt)
        saved: list[CheckpointSnapshot] = []
        moved: list[MovedAside] = []

        def write(conn) -> None:
            record = replace(self._record(query, "RESTORE", current), output_after=cut)
            saved.append(self.planning.catalog.snapshots.add(record, conn))
            if abandoned:
                self.planning.catalog.snapshots.remove(query.id, [s.number for s in abandoned], conn)
            self.planning.catalog.observed.rewind_progress(query.id, rewind.batch, conn)

        def files() -> Callable[[], None]:
            kept = snapshot_folder(query.checkpoint, saved[0].folder)
            copy_committed(query.checkpoint, kept, batch=current)
            swaps: list[OutputSwap] = []

            def undo() -> None:  # also of a partly done restore
                if moved:
                    shutil.rmtree(query.checkpoint, ignore_errors=True)
                    moved[0].restore()
                for swap in swaps:
                    swap.undo()
                shutil.rmtree(kept, ignore_errors=True)

            try:  # each step undoes itself if it fails midway; undo() takes back the ones done
                output = sink.path if sink is not None and not on_kafka else None
                bring_back = snapshot_output(query.checkpoint, snap.folder) if snap is not None else None
                keep = snapshot_output(query.checkpoint, saved[0].folder)
                swaps.append(OutputSwap(output, query, cut, keep, bring_back))
                moved.append(MovedAside([query.checkpoint, *_folders(query.checkpoint, abandoned)]))
                rewind.put_back(kept)
            except BaseException:
                undo()
                raise
            return undo

        result = Result(stmt.text, query_id=query.id)

        def after_commit(result: Result) -> None:
            moved[0].purge()
            again = f"batches {cut + 1}-{current}" if current > cut else "no batch"
            if on_kafka and sink is not None:
                output = f"{again} will be written to Kafka topic {sink.kafka_topic!r} again (at least once)"
            else:
                output = f"the output of {again} was taken out (kept with snapshot {saved[0].number})"
                if snap is not None and snap.output_after is not None:
                    output += f" and the output kept with snapshot {snap.number} put back"
            result.message = (
                f"Restored {query.id} to {rewind.shown}; {output}; the checkpoint it replaced is snapshot "
                f"{saved[0].number}"
            )
            if abandoned:
                result.message += f"; snapshots of later batches removed: {', '.join(str(s.number) for s in abandoned)}"

        return Step(result, write=write, files=files, after_commit=after_commit)

    def _keep_rollback(self, query: QueryInfo, abandoned: list[CheckpointSnapshot], stmt: st.Statement) -> None:
        """A version still in its readiness window may be rolled back to its UPGRADE snapshot:
        a restore must not drop that snapshot (restoring it, or one before it, is fine)."""
        undecided = any(
            v["version"] == query.version and v["outcome"] is None
            for v in self.planning.catalog.versions(query.id, self.planning.conn)
        )
        needed = [s for s in abandoned if s.kind == "UPGRADE" and s.version == query.version - 1]
        if undecided and needed:
            raise state_error_at(
                f"version {query.version} of {query.id} is still in its readiness window and its rollback needs "
                f"snapshot {needed[0].number}, which this restore would drop: RESUME it until it is ready "
                f"(it commits a batch), then RESTORE",
                stmt,
            )

    def _check_versions(self, query: QueryInfo, snap: CheckpointSnapshot, stmt: st.RestoreQuery) -> None:
        """A snapshot of an older version is restored only if every upgrade since ran in
        place on the same checkpoint: the current version can run on that version's state."""
        if snap.version == query.version:
            return
        versions = {v["version"]: v for v in self.planning.catalog.versions(query.id, self.planning.conn)}
        between = [versions.get(n) for n in range(snap.version + 1, query.version + 1)]
        numbers = range(snap.version + 1, query.version + 1)
        replacing = [n for n, v in zip(numbers, between, strict=True) if not v or v["verdict"] != "IN_PLACE"]
        if snap.version > query.version:
            raise state_error_at(
                f"snapshot {snap.number} of {query.id} holds version {snap.version}'s checkpoint, newer than "
                f"the query's version {query.version} (rolled back since): its state may not fit",
                stmt,
            )
        if replacing:
            raise state_error_at(
                f"snapshot {snap.number} of {query.id} holds version {snap.version}'s checkpoint and version(s) "
                f"{', '.join(map(str, replacing))} did not replace it in place: its state may not fit version "
                f"{query.version}",
                stmt,
            )

    def _record(self, query: QueryInfo, kind: str, batch: int) -> CheckpointSnapshot:
        return CheckpointSnapshot(
            query_id=query.id,
            number=0,  # numbered when recorded
            kind=kind,
            version=query.running_version or query.version,
            batch_id=batch,
            position=source_positions(query.checkpoint, batch),
            folder="",  # s<number>
            taken_at=time.time(),
            taken_by=self.planning.issuer or None,
        )


def _folders(checkpoint: str, snaps: list[CheckpointSnapshot]) -> list[str]:
    """The folders of ``snaps``: each copy, and the output a RESTORE snapshot kept."""
    return [p for s in snaps for p in (snapshot_folder(checkpoint, s.folder), snapshot_output(checkpoint, s.folder))]
