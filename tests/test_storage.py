"""The storage layout: where a source may live, what DROP ... DELETE TOPIC deletes, and file
effects that a concurrent statement cannot lose. On SQLite and PostgreSQL catalogs."""
import os

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StreamQLError, ValidationError
from airflow_provider_streamql.storage import layout as layout_module
from airflow_provider_streamql.storage.layout import Layout

from .support import stream_rows
from .test_statements import dump, topic_files

SETUP = "CREATE STREAM purchases (id INT KEY, cost DOUBLE) WITH (path='shop/purchases')"

# WITH (path=...) -> fragment of the error (every one changes nothing)
HOSTILE_PATHS = [
    (".", "is the topics folder itself"),
    ("..", "is outside the topics folder"),
    ("../checkpoints", "is outside the topics folder"),
    ("../../x", "is outside the topics folder"),
    ("/etc", "is outside the topics folder"),
    ("/", "is outside the topics folder"),
    ("{home}", "is outside the topics folder"),
    ("{home}/catalog.db", "is outside the topics folder"),
    ("{home}/topics", "is the topics folder itself"),
    ("shop", "holds the folder of PURCHASES"),
    ("shop/purchases", "is the folder of PURCHASES"),
    ("shop/purchases/inner", "lies inside the folder of PURCHASES"),
    ("a\x00b", "contains the control character"),
    ("a\nb", "contains the control character"),
    ("x" * 300, "longer than 255 bytes"),
    ("", "must be a non-empty string"),
]


@pytest.mark.parametrize("path, fragment", HOSTILE_PATHS)
def test_a_source_path_outside_the_layout_is_refused_and_changes_nothing(engine, home, path, fragment):
    engine.execute(SETUP)
    before, files = dump(engine), topic_files(home)
    statement = f"CREATE STREAM h (id INT) WITH (path='{path.format(home=home)}')"
    with pytest.raises(ValidationError) as info:
        engine.run([_create_source(engine, statement)])
    assert fragment in str(info.value)
    assert dump(engine) == before and topic_files(home) == files


def _create_source(engine, text):
    """Parse a statement whose path holds characters the tokenizer would take apart."""
    from airflow_provider_streamql.language import parse_one
    if "\x00" in text or "\n" in text:
        stmt = parse_one("CREATE STREAM h (id INT) WITH (path='placeholder')")
        stmt.properties["path"] = text.split("path='", 1)[1][:-2]
        return stmt
    return parse_one(text)


def test_drop_delete_topic_of_a_confined_source_keeps_the_rest_of_the_home(engine, home):
    engine.execute(SETUP + "; CREATE STREAM other (id INT); INSERT INTO other VALUES (1);"
                   "CREATE STREAM h (id INT) WITH (path='mine'); INSERT INTO h VALUES (2)")
    engine.execute("DROP STREAM h DELETE TOPIC")
    assert os.path.exists(os.path.join(home, "catalog.db")) or not engine.catalog.url.startswith("sqlite:///" + home)
    assert stream_rows(engine, "other") == [(1,)]
    assert not os.path.exists(os.path.join(home, "topics", "mine"))
    assert not [n for n in os.listdir(os.path.join(home, "topics")) if n.startswith(".dropped-")]


def test_allowed_roots_admit_outside_paths_and_nothing_else(engine, home, tmp_path, monkeypatch):
    root = tmp_path / "lake"
    root.mkdir()
    monkeypatch.setenv(layout_module.ALLOWED_PATHS_ENV, str(root))
    allowed = Engine(engine.catalog.url, home=home, issuer="test")
    try:
        allowed.execute(f"CREATE STREAM ext (id INT) WITH (path='{root}/ext'); INSERT INTO ext VALUES (7)")
        assert stream_rows(allowed, "ext") == [(7,)]
        for path, fragment in ((str(root), "is outside"), (str(tmp_path), "is outside")):
            with pytest.raises(ValidationError, match=fragment):
                allowed.execute(f"CREATE STREAM bad (id INT) WITH (path='{path}')")
        allowed.execute("DROP STREAM ext DELETE TOPIC")
        assert os.listdir(root) == []
    finally:
        allowed.close()


def test_an_allowed_root_around_the_home_never_admits_the_home(tmp_path):
    home = tmp_path / "home"
    layout = Layout(str(home), allowed_roots=[str(tmp_path)])
    assert layout.source_path(str(tmp_path / "data")) == str(tmp_path / "data")
    for path in (home, home / "catalog.db", home / "checkpoints" / "X", home / "runtimes"):
        with pytest.raises(ValidationError, match="overlaps"):
            layout.source_path(str(path))


def test_a_symlink_inside_the_topics_folder_cannot_lead_out(engine, home, tmp_path):
    os.makedirs(os.path.join(home, "topics"), exist_ok=True)
    os.symlink(str(tmp_path), os.path.join(home, "topics", "escape"))
    with pytest.raises(ValidationError, match="is outside the topics folder"):
        engine.execute("CREATE STREAM h (id INT) WITH (path='escape/data')")


def test_drop_delete_topic_removes_checkpoints_dead_letters_and_snapshots(engine, home):
    engine.execute(SETUP + "; CREATE STREAM big AS SELECT * FROM purchases WHERE cost > 10")
    query = engine.query("CSAS_BIG_1")
    folders = [query.checkpoint, query.checkpoint + ".dead_letters", query.checkpoint + ".snapshots/v0001"]
    for folder in folders:  # as a runtime leaves them
        os.makedirs(folder)
        open(os.path.join(folder, "0"), "w").close()
    engine.execute("TERMINATE CSAS_BIG_1; DROP STREAM big DELETE TOPIC")
    assert [f for f in folders + [query.checkpoint + ".snapshots"] if os.path.exists(f)] == []


def test_a_drop_cannot_delete_what_a_later_statement_wrote(engine, home, monkeypatch):
    """DROP x DELETE TOPIC, then (from another engine, as from another process) CREATE x and
    INSERT INTO x before the drop's cleanup runs: the insert survives."""
    engine.execute("CREATE STREAM x (id INT); INSERT INTO x VALUES (1)")
    other = Engine(engine.catalog.url, home=home, issuer="other")
    purge = layout_module.MovedAside.purge

    def purge_after_the_other_writer(self):
        other.execute("CREATE STREAM x (id INT); INSERT INTO x VALUES (2)")
        purge(self)
    monkeypatch.setattr(layout_module.MovedAside, "purge", purge_after_the_other_writer)
    try:
        engine.execute("DROP STREAM x DELETE TOPIC")
        assert stream_rows(other, "x") == [(2,)]
    finally:
        other.close()


def test_a_failed_script_undoes_its_file_effects(engine, home):
    """File effects happen inside the transaction; if it fails, they are undone."""
    engine.execute(SETUP)
    before, files = dump(engine), topic_files(home)
    with pytest.raises(ValidationError):
        engine.execute("CREATE STREAM n (id INT); INSERT INTO n VALUES (1); INSERT INTO purchases VALUES (1, 2.0);"
                       "CREATE STREAM bad AS SELECT nope FROM n")
    assert dump(engine) == before and topic_files(home) == files
    assert not os.path.exists(os.path.join(home, "topics", "N"))


def test_a_file_effect_that_fails_rolls_the_whole_script_back(engine, home):
    """Checks pass, then the disk says no (a file sits where the stream's folder goes): the
    script is not committed, the command log does not list it, and earlier effects are undone."""
    engine.execute(SETUP)
    os.makedirs(os.path.join(home, "topics"), exist_ok=True)
    open(os.path.join(home, "topics", "N"), "w").close()
    before, files = dump(engine), topic_files(home)
    with pytest.raises(StreamQLError) as info:
        engine.execute("INSERT INTO purchases VALUES (1, 2.0); CREATE STREAM n (id INT); INSERT INTO n VALUES (1)")
    assert "could not change" in str(info.value) and os.path.join(home, "topics", "N") in str(info.value)
    assert dump(engine) == before and topic_files(home) == files


def test_a_pull_query_that_fails_after_the_scripts_writes_says_they_were_applied(engine, home):
    """Reads run after the script's writes are committed, never under the catalog's write
    lock (issue 28): a SELECT that cannot read its source fails, saying that the INSERT
    before it was applied, as a ksqlDB script stops at its failing statement."""
    engine.execute("CREATE STREAM s (id INT)")
    with open(os.path.join(home, "topics", "S", "bad.json"), "w") as f:
        f.write('{"id": 1}\n{"id": \n')
    commands = len(engine.catalog.commands.all())
    with pytest.raises(ValidationError, match="line 2 of file .* were applied before it ran"):
        engine.execute("INSERT INTO s VALUES (2); SELECT * FROM s")
    assert [c["statement"] for c in engine.catalog.commands.all()[commands:]] == ["INSERT INTO s VALUES (2)"]


@pytest.mark.parametrize("script, refused", [
    # reads run once the script's writes are applied: one before a change of what it reads
    # would show the later state
    ("INSERT INTO s VALUES (1); SELECT * FROM s; INSERT INTO s VALUES (2); SELECT * FROM s",
     "'SELECT \\* FROM s' reads S before 'INSERT INTO s VALUES \\(2\\)' changes it"),
    ("SELECT * FROM s; DROP STREAM s", "'SELECT \\* FROM s' reads S before 'DROP STREAM s' changes it"),
    ("SELECT * FROM s; CREATE OR REPLACE STREAM s (id INT, n INT)", "reads S before 'CREATE OR REPLACE"),
    ("INSERT INTO s VALUES (1); INSERT INTO s VALUES (2); SELECT * FROM s", None),
    ("SELECT * FROM s; INSERT INTO t VALUES (2); CREATE STREAM u (id INT)", None),  # changes nothing it read
    ("SELECT * FROM s; SHOW STREAMS", None),
])
def test_a_read_before_a_change_of_what_it_reads_is_refused_and_changes_nothing(engine, home, script, refused):
    engine.execute("CREATE STREAM s (id INT); CREATE STREAM t (id INT)")
    before, files = dump(engine), topic_files(home)
    if refused is None:
        engine.execute(script)
        return
    with pytest.raises(ValidationError, match=refused):
        engine.execute(script)
    assert dump(engine) == before and topic_files(home) == files
