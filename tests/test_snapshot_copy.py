"""Copying a checkpoint as of its last committed batch (storage/snapshots.py), on checkpoint
folders laid out as Spark 4.3 writes them: what a running query wrote for a later batch is
left out, and a copy that cannot hold a batch's source log fails instead of lying. And the
snapshot an in-place upgrade keeps (runtime/rollout.py): hard links that hold the checkpoint
as the old version left it while the new one writes on."""
import errno
import json
import os

import pytest

from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.runtime.rollout import restore_snapshot, take_snapshot
from airflow_provider_streamql.storage.snapshots import copy_committed, later_output


def write(path, text="v1\n{}"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def checkpoint(root, *, planned, committed, file_log, state_versions, kafka=False):
    """Batches 0..planned planned (0..committed committed); a file source logging offsets
    0..file_log (batch b reads up to log offset b); state versions 1..state_versions."""
    for b in range(planned + 1):
        lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps({"logOffset": b})]
        if kafka:
            lines.append(json.dumps({"orders": {"0": 10 * b}}))
        write(f"{root}/offsets/{b}", "\n".join(lines))
        write(f"{root}/offsets/.{b}.crc", "x")
    for b in range(committed + 1):
        write(f"{root}/commits/{b}", 'v1\n{"nextBatchWatermarkMs":0}')
    for n in file_log:
        write(f"{root}/sources/0/{n}", "v1\n" + json.dumps({"path": f"file:///in/{n}.json", "timestamp": 1, "batchId": n}))
    if kafka:
        write(f"{root}/sources/1/0", 'v1\n{"orders":{"0":0}}')
    for v in range(1, state_versions + 1):
        write(f"{root}/state/0/0/{v}.delta", "x")
        write(f"{root}/state/0/0/.{v}.delta.crc", "x")
    write(f"{root}/state/0/0/temp-123", "partial")
    write(f"{root}/state/0/_metadata/metadata", "v1\n{}")
    write(f"{root}/metadata", '{"id":"x"}')


def listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_a_live_checkpoint_is_copied_as_of_its_last_commit(tmp_path):
    live, copy = str(tmp_path / "live"), str(tmp_path / "copy")
    # batch 3 is running: planned, its source entry and state version 4 written, no commit
    checkpoint(live, planned=3, committed=2, file_log=range(4), state_versions=4, kafka=True)
    assert copy_committed(live, copy) == 2
    got = listing(copy)
    assert [p for p in got if p.startswith("offsets/")] == ["offsets/.0.crc", "offsets/.1.crc", "offsets/.2.crc",
                                                            "offsets/0", "offsets/1", "offsets/2"]
    assert [p for p in got if p.startswith("sources/0/")] == ["sources/0/0", "sources/0/1", "sources/0/2"]
    assert "sources/1/0" in got  # a Kafka source's initial offsets stay
    assert [p for p in got if p.endswith(".delta")] == ["state/0/0/1.delta", "state/0/0/2.delta", "state/0/0/3.delta"]
    assert not any("temp-" in p for p in got) and "metadata" in got


def test_a_source_log_compacted_past_the_batch_mid_copy_fails_the_copy(tmp_path):
    live, copy = str(tmp_path / "live"), str(tmp_path / "copy")
    checkpoint(live, planned=15, committed=15, file_log=[], state_versions=0)
    write(f"{live}/sources/0/19.compact", "v1\n" + "\n".join(json.dumps({"path": f"file:///in/{n}.json"}) for n in range(20)))
    with pytest.raises(StateError, match="kept changing while it was copied"):
        copy_committed(live, copy, batch=15)
    assert not os.path.exists(copy)


def test_later_output_is_the_query_s_own_files_of_later_batches(tmp_path):
    sink = tmp_path / "sink"
    names = ["Q_1-v0001-b000000000002.json", "Q_1-v0002-b000000000003-p00001.json", "Q_1-v0002-b000000000001.json",
             "OTHER_2-v0001-b000000000009.json", ".tmp-Q_1-v0002-b000000000004"]
    for n in names:
        write(str(sink / n), "{}")
    assert [os.path.basename(p) for p in later_output(str(sink), "Q_1", table=False, batch=1)] == \
        ["Q_1-v0001-b000000000002.json", "Q_1-v0002-b000000000003-p00001.json"]


def replace_by_rename(path, text):
    """How Spark writes a checkpoint file: whole, under another name, renamed in."""
    write(path + ".tmp", text)
    os.replace(path + ".tmp", path)


def contents(root):
    return {p: open(os.path.join(root, p)).read() for p in listing(root)}


# what Spark does to the checkpoint once the new version runs -> the path it touches
AFTER_THE_SWAP = [
    (lambda cp: replace_by_rename(f"{cp}/offsets/2", "v1\nrewritten"), "a batch's offsets written again"),
    (lambda cp: replace_by_rename(f"{cp}/state/0/0/2.delta", "y"), "a state version written again"),
    (lambda cp: os.remove(f"{cp}/offsets/0"), "an old batch purged"),
    (lambda cp: write(f"{cp}/commits/3", "v1\n{}"), "a new batch committed"),
    (lambda cp: replace_by_rename(f"{cp}/sources/0/3.compact", "v1\n[]"), "the source log compacted"),
]


@pytest.mark.parametrize("change, what", AFTER_THE_SWAP, ids=[w for _, w in AFTER_THE_SWAP])
def test_an_upgrade_s_snapshot_keeps_the_checkpoint_as_the_old_version_left_it(tmp_path, change, what):
    live = str(tmp_path / "checkpoints" / "Q_1")
    checkpoint(live, planned=2, committed=2, file_log=range(3), state_versions=2)
    before = contents(live)
    snapshot = take_snapshot(live, 1)
    change(live)
    assert contents(snapshot) == before
    restore_snapshot(live, snapshot)  # a rollback puts it back byte for byte
    assert contents(live) == before


def test_an_upgrade_s_snapshot_shares_the_checkpoint_s_files_where_it_can(tmp_path, monkeypatch):
    live = str(tmp_path / "checkpoints" / "Q_1")
    checkpoint(live, planned=2, committed=2, file_log=range(3), state_versions=2)
    snapshot = take_snapshot(live, 1)  # a week's source log takes no second copy's time or space
    assert all(os.path.samefile(f"{live}/{p}", f"{snapshot}/{p}") for p in listing(live))

    def refused(source, target, **how):
        raise OSError(errno.EXDEV, "Invalid cross-device link")  # a file system without links here

    monkeypatch.setattr(os, "link", refused)
    copied = take_snapshot(live, 2)
    assert contents(copied) == contents(live)
    assert not any(os.path.samefile(f"{live}/{p}", f"{copied}/{p}") for p in listing(live))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_file_of_another_user_in_the_checkpoint_is_copied_not_linked(tmp_path):
    """Someone who could write into the checkpoint cannot change the kept snapshot later
    through a file of theirs: it is copied as it was when the snapshot was taken."""
    live = str(tmp_path / "checkpoints" / "Q_1")
    checkpoint(live, planned=2, committed=2, file_log=range(3), state_versions=2)
    planted = f"{live}/state/0/0/2.delta"
    os.chown(planted, 12345, 12345)
    snapshot = take_snapshot(live, 1)
    with open(planted, "w") as f:  # its owner writes it in place
        f.write("changed")
    assert open(f"{snapshot}/state/0/0/2.delta").read() == "x"
    assert os.path.samefile(f"{live}/offsets/2", f"{snapshot}/offsets/2")  # the runtime's own: linked
