"""Paths are checked where they are used (issue 28, section 3; docs/operations.md, "Where data
may live"): what is on disk (a link left in a topic folder, a topic folder or a query's
snapshots replaced by a link, a ``_spark_metadata`` entry naming another place) never makes a
statement read, write, move or delete outside the folder the layout placed. Each case is
refused with a StateError naming where the link leads, and changes nothing, on SQLite and
PostgreSQL catalogs."""
import json
import os
import shutil

import pytest

from airflow_provider_streamql.catalog import BadRecord, SourceInfo
from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.language.statements import Column
from airflow_provider_streamql.runtime import batch_writer, connectors, rollout, tables
from airflow_provider_streamql.storage import checkpoints, state, topics
from airflow_provider_streamql.storage.deadletter import append_dead_letters, dead_letter_source
from airflow_provider_streamql.storage.layout import Part
from airflow_provider_streamql.storage.snapshots import copy_committed

from .test_statements import dump

SETUP = """
CREATE STREAM s (id INT); CREATE TABLE t (k STRING PRIMARY KEY, v INT);
CREATE STREAM nested (id INT) WITH (path='shop/nested');
CREATE STREAM big AS SELECT * FROM s;
INSERT INTO s VALUES (1); INSERT INTO t VALUES ('a', 1);
"""
SECRET = '{"id": 42, "k": "x", "v": 42}\n'


class Disk:
    """A home set up by SETUP, and a folder outside it holding what a link may point at."""

    def __init__(self, engine, home, outside):
        self.engine, self.home, self.outside = engine, home, str(outside)
        self.topics = os.path.join(home, "topics")
        self.checkpoint = engine.query("CSAS_BIG_1").checkpoint
        write(os.path.join(self.outside, "secret.json"), SECRET)
        for folder in ("s0001", "s0002", "s0001.output"):
            write(os.path.join(self.outside, folder, "precious"), "keep me")

    def topic(self, name, *rest):
        return os.path.join(self.topics, name, *rest)

    def out(self, *rest):
        return os.path.join(self.outside, *rest)

    def committed(self):
        """The query's checkpoint as Spark leaves it after batch 0 (no Spark needed to copy it)."""
        write(os.path.join(self.checkpoint, "commits", "0"), 'v1\n{"nextBatchWatermarkMs":0}')
        write(os.path.join(self.checkpoint, "offsets", "0"), 'v1\n{"batchWatermarkMs":0}')
        write(os.path.join(self.checkpoint, "metadata"), '{"id":"x"}')

    def snapshot(self):
        self.committed()
        self.engine.execute("PAUSE CSAS_BIG_1; SNAPSHOT CSAS_BIG_1")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def to_link(path, target):
    """``path`` (a file or folder, gone first if there) becomes a link to ``target``."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def sink_log(d, entry):
    write(d.topic("S", "_spark_metadata", "0"), "v1\n" + json.dumps({"path": entry, "action": "add"}) + "\n")


def outside_log(d):
    """A stream's sink log kept outside, and a link to it left in its place."""
    write(d.topic("S", "x.json"), '{"id": 7}\n')
    sink_log(d, "file://" + d.topic("S", "x.json"))
    shutil.move(d.topic("S", "_spark_metadata"), d.out("log"))
    to_link(d.topic("S", "_spark_metadata"), d.out("log"))


def failing_snapshot(d):
    """A checkpoint whose copy fails (a file source's offset without its log), with
    ``.snapshots`` a link: the SNAPSHOT that fails cleans up where the link leads."""
    d.committed()
    write(os.path.join(d.checkpoint, "offsets", "0"), 'v1\n{"batchWatermarkMs":0}\n{"logOffset":0}')
    to_link(d.checkpoint + ".snapshots", d.outside)


def outside_snapshots(d):
    """``.snapshots`` moved outside and a link left in its place."""
    d.snapshot()
    shutil.rmtree(d.out("s0001"))
    shutil.copytree(d.checkpoint + ".snapshots/s0001", d.out("s0001"))
    to_link(d.checkpoint + ".snapshots", d.outside)


# what is done to the disk after SETUP -> the statement that must refuse it (and the words saying why)
CASES = [
    ("a link in a stream's folder, read by a pull query", lambda d: to_link(d.topic("S", "x.json"), d.out("secret.json")), "SELECT * FROM s", "is a link to"),
    ("a link in a table's changelog, read by a pull query", lambda d: to_link(d.topic("T", "x.json"), d.out("secret.json")), "SELECT * FROM t", "is a link to"),
    ("a changelog entry folder that is a link", lambda d: to_link(d.topic("T", "v0001-b000000000001"), d.out("s0001")), "SELECT * FROM t", "is a link to"),
    ("a sink log entry naming an absolute path outside", lambda d: sink_log(d, "file://" + d.out("secret.json")), "SELECT * FROM s", "not a file of the folder it describes"),
    ("a sink log entry climbing out of its folder", lambda d: sink_log(d, "file://" + d.topic("S", "..", "..", "..", "outside", "secret.json")), "SELECT * FROM s", "not a file of the folder it describes"),
    ("a sink log that is a link to a log outside", outside_log, "SELECT * FROM s", "is a link to"),
    ("a stream's folder replaced by a link, read by a pull query", lambda d: to_link(d.topic("S"), d.outside), "SELECT * FROM s", "is a link to"),
    ("a stream's folder replaced by a link, written by INSERT VALUES", lambda d: to_link(d.topic("S"), d.outside), "INSERT INTO s VALUES (2)", "is a link to"),
    ("a table's folder replaced by a link, written by INSERT VALUES", lambda d: to_link(d.topic("T"), d.outside), "INSERT INTO t VALUES ('b', 2)", "is a link to"),
    ("a topic folder behind a linked parent, written by INSERT VALUES", lambda d: to_link(d.topic("shop"), d.outside), "INSERT INTO nested VALUES (2)", "lies behind a link"),
    ("snapshots replaced by a link, SNAPSHOT with retention", outside_snapshots, "SNAPSHOT CSAS_BIG_1 WITH (keep = 1)", "lies behind a link"),
    ("snapshots replaced by a link, a SNAPSHOT that fails", failing_snapshot, "SNAPSHOT CSAS_BIG_1", "lies behind a link"),
    ("snapshots replaced by a link, RESTORE", outside_snapshots, "RESTORE CSAS_BIG_1 TO SNAPSHOT 1", "lies behind a link"),
    ("a snapshot holding a link to a file outside, RESTORE", lambda d: (d.snapshot(), to_link(d.checkpoint + ".snapshots/s0001/offsets/1", d.out("secret.json"))), "RESTORE CSAS_BIG_1 TO SNAPSHOT 1", "is a link to"),
    ("a checkpoint holding a link to a folder outside, SNAPSHOT", lambda d: (d.committed(), to_link(os.path.join(d.checkpoint, "state"), d.outside)), "SNAPSHOT CSAS_BIG_1", "is a link to"),
    ("a stream's folder replaced by a link, DROP ... DELETE TOPIC", lambda d: to_link(d.topic("S"), d.outside), "TERMINATE CSAS_BIG_1; DROP STREAM big; DROP STREAM s DELETE TOPIC", "is a link to"),
]


def tree(root):
    """Every name under ``root`` with its content (a link: where it points), links not followed."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                found[path] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[path] = f.read()
    return found


@pytest.mark.parametrize("arrange, statement, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_link_out_of_the_layout_is_refused_and_changes_nothing(engine, home, tmp_path, arrange, statement, words):
    engine.execute(SETUP)
    disk = Disk(engine, home, tmp_path / "outside")
    arrange(disk)
    before = dump(engine), tree(home), tree(disk.outside)
    with pytest.raises(StateError) as info:
        engine.execute(statement)
    assert words in str(info.value) and disk.outside in str(info.value), str(info.value)
    assert (dump(engine), tree(home), tree(disk.outside)) == before


# on disk under a folder F (a link: "name -> target", target relative to the test's root) ->
# the path asked for, inside F -> what it resolves to (None: refused)
RESOLVED = [
    (["F/a.json"], "F/a.json", "F/a.json"),
    (["F/a.json", "F/b.json -> F/a.json"], "F/b.json", "F/a.json"),  # a link inside F is followed
    (["F/sub/a.json", "F/in -> F/sub"], "F/in/a.json", "F/sub/a.json"),
    (["out/a.json", "F/b.json -> out/a.json"], "F/b.json", None),
    (["out/d/a.json", "F/d -> out/d"], "F/d/a.json", None),
    (["F/a.json", "out/back -> F", "F/round -> out/back"], "F/round/a.json", "F/a.json"),  # resolves inside F
    (["out/x/a.json", "F/a -> out/x", "out/x/b -> F"], "F/a/b", None),  # a link that leaves F on the way
    (["F/a.json"], "F/../out/a.json", None),
    (["F/dangling -> out/nothing"], "F/dangling", None),
]


def lay_out(root, entries):
    for entry in entries:
        name, _, target = entry.partition(" -> ")
        if target:
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            os.symlink(os.path.join(root, target), os.path.join(root, name))
        else:
            write(os.path.join(root, name), "x")
    os.makedirs(os.path.join(root, "F"), exist_ok=True)


@pytest.mark.parametrize("entries, path, expected", RESOLVED)
def test_a_path_resolves_only_inside_its_part(tmp_path, entries, path, expected):
    lay_out(str(tmp_path), entries)
    part = Part(str(tmp_path / "F"))
    if expected is None:
        with pytest.raises(StateError, match="outside|is a link to|lies behind a link|not inside"):
            part.resolve(str(tmp_path / path))
    else:
        assert part.resolve(str(tmp_path / path)) == str(tmp_path / expected)


# on disk -> a folder the layout placed that is a link, or lies behind one
NOT_PLACED = [
    (["out/F/a.json", "F2 -> out/F"], "F2"),
    (["out/p/F/a.json", "p -> out/p"], "p/F"),
    (["F2 -> out/nothing"], "F2"),
]


@pytest.mark.parametrize("entries, folder", NOT_PLACED)
def test_a_part_that_is_a_link_or_lies_behind_one_is_refused(tmp_path, entries, folder):
    lay_out(str(tmp_path), entries)
    with pytest.raises(StateError, match=r"is a link to|lies behind a link"):
        Part(str(tmp_path / folder))


def cp(root):
    """A checkpoint with batch 0 planned and committed, a file source's log and state."""
    write(f"{root}/offsets/0", 'v1\n{"batchWatermarkMs":5}\n{"logOffset":0}')
    write(f"{root}/commits/0", "v1\n{}")
    write(f"{root}/sources/0/0", 'v1\n{"path":"file:///in/a.json","batchId":0}')
    write(f"{root}/state/0/_metadata/metadata", 'v1\n{"operatorInfo":{"operatorName":"agg"},"stateStoreInfo":[]}')
    return root


def outside_checkpoint(tmp_path):
    """A whole checkpoint outside, with a file an interrupted write would leave."""
    root = cp(str(tmp_path / "out"))
    write(f"{root}/offsets/.1.0123abcd-0123-4567-89ab-0123456789ab.tmp", "precious")
    return root


# a reader of a checkpoint -> the part of the checkpoint replaced by a link to the same part outside
READERS = [
    (checkpoints.last_committed_batch, "commits"),
    (checkpoints.last_planned_batch, "offsets"),
    (lambda c: checkpoints.source_positions(c, 0), "offsets"),
    (lambda c: checkpoints.source_positions(c, 0), "offsets/0"),
    (checkpoints.planned_watermark_ms, "offsets/0"),
    (checkpoints.processed_files, "sources"),
    (checkpoints.processed_files, "sources/0/0"),
    (checkpoints.remove_interrupted_writes, "offsets"),
    (state.recorded_state, "state"),
    (state.recorded_state, "state/0/_metadata/metadata"),
    (lambda c: copy_committed(c, c + ".copy"), "state"),
]


@pytest.mark.parametrize("reader, part", READERS)
def test_a_checkpoint_is_read_only_inside_itself(tmp_path, reader, part):
    outside = outside_checkpoint(tmp_path)
    checkpoint = cp(str(tmp_path / "checkpoint"))
    to_link(os.path.join(checkpoint, part), os.path.join(outside, part))
    before = tree(outside)
    with pytest.raises(StateError, match="is a link to|lies behind a link") as info:
        reader(checkpoint)
    assert repr(os.path.join(outside, part)) in str(info.value)  # where the link leads
    assert tree(outside) == before


COLUMNS = [Column.of("id", "INT")]


def test_a_dead_letter_stream_replaced_by_a_link_is_refused(engine, home, tmp_path):
    engine.execute(SETUP)
    source, outside = dead_letter_source(engine.query("CSAS_BIG_1"), home), str(tmp_path / "outside")
    os.makedirs(outside)
    to_link(source.path, outside)
    record = BadRecord("CSAS_BIG_1", "r1", 0, "S", "f.json", 1, "{", "not JSON", "SKIPPED")
    with pytest.raises(StateError, match="is a link to"):
        append_dead_letters(source, [record])
    assert os.listdir(outside) == []


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_an_append_never_writes_through_a_link_left_at_its_hidden_name(tmp_path, fmt):
    """A named append (dead letters) whose hidden file name someone linked to a file outside:
    the link goes, the file outside stays as it was, and the record is written in the folder."""
    folder, secret = str(tmp_path / "topic"), str(tmp_path / "secret")
    write(secret, "keep me")
    to_link(os.path.join(folder, ".b1" + topics.FORMATS[fmt][1] + ".tmp"), secret)
    written = topics.append(folder, fmt, COLUMNS, [{"id": 7}], name="b1")
    assert open(secret).read() == "keep me" and not os.path.islink(written)
    assert topics.read_file(written, fmt, COLUMNS) == [{"id": 7}]


def runtime_source(path, kind="STREAM"):
    return SourceInfo("OUT", kind, COLUMNS, {"batch_files": True}, "JSON", path)


def runtime_checkpoint(root):
    """A checkpoint and the snapshot a rollout took of it, as the runtime keeps them."""
    cp(os.path.join(root, "CSAS_OUT_1"))
    shutil.copytree(os.path.join(root, "CSAS_OUT_1"), os.path.join(root, "CSAS_OUT_1.snapshots", "v0001"))


# the runtime's own file effects (no Spark session needed: each is checked before Spark is
# used) -> what is linked out of its folder (name under the test's root -> target under ``out``)
RUNTIME = [
    (lambda r: connectors.source_stream(None, runtime_source(f"{r}/topic"), checked=False), "topic"),
    (lambda r: tables.changelog_stream(None, runtime_source(f"{r}/topic", "TABLE")), "topic"),
    (lambda r: batch_writer.BatchWriter(runtime_source(f"{r}/topic"), "Q_1-v0001", lambda: None, as_directory=False)._write(None, 0), "topic"),
    (lambda r: batch_writer.BatchWriter(runtime_source(f"{r}/topic"), "Q_1-v0001", lambda: None, as_directory=False)._write(None, 0), "topic/.tmp-Q_1-v0001-b000000000000"),
    (lambda r: batch_writer.BatchWriter(runtime_source(f"{r}/topic"), "Q_1-v0001", lambda: None, as_directory=False)._write(None, 0), "topic/.tmp-Q_1-v0001-b000000000000-0123456789ab"),
    (lambda r: batch_writer.BatchWriter(runtime_source(f"{r}/topic", "TABLE"), "v0001", lambda: None, as_directory=True)._write(None, 0), "topic/v0001-b000000000000"),
    (lambda r: rollout.discard_output(f"{r}/topic", "Q_1", 2), "topic/Q_1-v0002-b000000000001.json"),
    (lambda r: rollout.take_snapshot(f"{r}/CSAS_OUT_1", 2), "CSAS_OUT_1.snapshots"),
    (lambda r: rollout.restore_snapshot(f"{r}/CSAS_OUT_1", f"{r}/CSAS_OUT_1.snapshots/v0001"), "CSAS_OUT_1.snapshots/v0001/offsets"),
]


@pytest.mark.parametrize("effect, linked", RUNTIME)
def test_the_runtime_writes_moves_and_deletes_only_inside_its_folders(tmp_path, effect, linked):
    root, outside = str(tmp_path / "home"), str(tmp_path / "out")
    write(os.path.join(outside, "precious"), "keep me")
    os.makedirs(os.path.join(root, "topic"))
    runtime_checkpoint(root)
    to_link(os.path.join(root, linked), outside)
    before = tree(outside)
    with pytest.raises(StateError, match="is a link to|lies behind a link") as info:
        effect(root)
    assert repr(outside) in str(info.value) and tree(outside) == before
