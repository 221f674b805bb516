"""The interactive shell (issue 31): ``streamql`` alone or ``streamql shell`` opens a prompt
like ksqlDB's CLI, driven here through a real pseudo-terminal and through a pipe; its
completion and the language's cut of typed-in text, table by table."""
import json
import re
import subprocess

import pytest

from airflow_provider_streamql.cli.completion import candidates
from airflow_provider_streamql.errors import ParseError
from airflow_provider_streamql.language.script import cut
from airflow_provider_streamql.views.reader import Names

from .support import CLI
from .terminal import CONTINUATION, CTRL_C, CTRL_D, TAB, UP, Terminal

SETUP = "CREATE STREAM purchases (id INT KEY, item STRING, cost DOUBLE); CREATE TABLE stock (item STRING PRIMARY KEY, n INT);"


@pytest.fixture
def shell_env(env, tmp_path):
    return {**env, "STREAMQL_HISTORY": str(tmp_path / "history"), "TERM": "xterm"}


@pytest.fixture
def terminal(shell_env):
    terminals = []

    def open_(*args: str) -> Terminal:
        t = Terminal(shell_env, *args)
        terminals.append(t)
        t.until()
        return t

    yield open_
    for t in terminals:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


# (what is typed, line by line; what the shell shows once the last line is typed)
SESSIONS = [
    # a statement over several lines runs when a ';' ends it, the continuation prompt between
    (["CREATE STREAM s (id INT KEY,", "v STRING);"], "Created stream S"),
    # a ';' inside quotes or a comment ends nothing
    (["INSERT INTO purchases VALUES (1, 'a;b', 2.0) -- not; yet", ";", "SELECT item FROM purchases;"], "a;b"),
    # two statements on a line run in order
    (["SHOW STREAMS; SHOW TABLES;"], "STOCK"),
    # an error (where and why, as exec shows it) and the shell goes on
    (["SELECT nope;"], "line 1, column 8: a SELECT needs FROM"),
    (["SELECT nope;", "DESCRIBE stock;"], "Type: TABLE"),
    # a failed request changes nothing: its CREATE is not applied
    (["CREATE STREAM t (a INT); SELECT nope;", "DESCRIBE t;"], "unknown stream or table 'T'"),
    # a SET holds for the rest of the session, an UNSET ends it
    (["SET 'auto.offset.reset' = 'earliest';", "SHOW PROPERTIES;"], "auto.offset.reset | earliest"),
    (["SET 'auto.offset.reset' = 'earliest';", "UNSET 'auto.offset.reset';", "SHOW PROPERTIES;"],
     "auto.offset.reset | null"),
    # ... but not a SET of a request that failed
    (["SET 'auto.offset.reset' = 'earliest'; SELECT nope;", "SHOW PROPERTIES;"], "auto.offset.reset | null"),
    # Ctrl-C drops the input typed so far
    ([f"CREATE STREAM dropped (a INT{CTRL_C}", "SHOW STREAMS;"], "PURCHASES"),
    (["help"], "RUN SCRIPT 'file.sql'"),
]


@pytest.mark.parametrize("lines, shown", SESSIONS)
def test_the_shell_runs_what_is_typed(sqlite_engine, terminal, lines, shown):
    sqlite_engine.execute(SETUP)
    shell = terminal()
    out = shell.run(*lines)
    # what it shows, not the echo of what is typed; a table's columns padded to any width
    assert shown in re.sub(r" +\|", " |", out.removeprefix(lines[-1]))
    assert "Traceback" not in out
    assert shell.leave() == 0


def test_an_open_statement_shows_the_continuation_prompt(terminal):
    shell = terminal()
    shell.type("SHOW\n")
    shell.until(CONTINUATION)
    assert "name | format" in shell.run("STREAMS;")
    assert shell.leave() == 0


def test_ctrl_c_stops_a_print_and_the_shell_goes_on(sqlite_engine, terminal):
    sqlite_engine.execute(SETUP + "INSERT INTO purchases VALUES (1, 'tea', 2.5);")
    shell = terminal()
    shell.type("PRINT purchases FROM BEGINNING;\n")
    assert '"item":"tea"' in shell.until("file: ")  # the record, then it keeps reading
    shell.type(CTRL_C)
    shell.until()
    assert "Type: TABLE" in shell.run("DESCRIBE stock;")
    assert shell.leave() == 0


@pytest.mark.parametrize("args, header, stored, later", [
    ((), "item | cost\n", "tea | 2.5", "pot | 9"),
    (("shell", "--json"), '{"columns": ["item", "cost"]}\n', '{"item": "tea", "cost": 2.5}',
     '{"item": "pot", "cost": 9.0}'),
])
def test_a_push_query_streams_rows_until_ctrl_c_and_the_shell_goes_on(sqlite_engine, terminal, args, header, stored,
                                                                       later):
    sqlite_engine.execute(SETUP + "INSERT INTO purchases VALUES (1, 'tea', 2.5);")
    shell = terminal(*args)
    shell.run("SET 'auto.offset.reset' = 'earliest';")  # the session's setting: from the first row
    shell.type("SELECT item, cost FROM purchases WHERE cost > 1 EMIT CHANGES;\n")
    assert shell.until(stored).endswith(header)  # the columns, then the row stored
    sqlite_engine.execute("INSERT INTO purchases VALUES (2, 'cup', 0.5), (3, 'pot', 9.0)")
    assert "cup" not in shell.until(later)  # a row committed while it runs, through its WHERE
    shell.type(CTRL_C)
    shell.until()
    assert "Type: TABLE" in shell.run("DESCRIBE stock;")
    assert shell.leave() == 0


@pytest.mark.parametrize("how", [CTRL_D, "exit\n", "quit;\n"])
def test_ctrl_d_exit_and_quit_leave_with_0(terminal, how):
    assert terminal().leave(how) == 0


def test_streamql_alone_opens_the_shell(shell_env):
    shell = Terminal(shell_env)
    shell.until()
    assert "name | format" in shell.run("SHOW STREAMS;")
    assert shell.leave() == 0


# (keys typed, what the completed statement shows when it runs)
COMPLETIONS = [
    (f"DESCR{TAB}pur{TAB};", "Name: PURCHASES"),  # a keyword, then a stream's name
    (f"SHOW TAB{TAB};", "STOCK"),  # the next word of a statement
    (f"INSERT INTO purchases (id, co{TAB}) VALUES (7, 9.5); SELECT * FROM purchases;", "9.5"),  # a column
    (f"SELECT * FROM purchases WHERE co{TAB} < 0;", "(0 rows)"),
]


@pytest.mark.parametrize("keys, shown", COMPLETIONS)
def test_tab_completes_statements_names_and_columns(sqlite_engine, terminal, keys, shown):
    sqlite_engine.execute(SETUP)
    shell = terminal()
    assert shown in shell.run(keys)
    assert shell.leave() == 0


def test_history_is_recalled_in_the_next_session(sqlite_engine, terminal, shell_env, tmp_path):
    sqlite_engine.execute(SETUP)
    first = terminal()
    first.run("DESCRIBE stock;")
    assert first.leave() == 0
    second = terminal()
    assert "Type: TABLE" in second.run(UP)
    assert second.leave() == 0
    assert (tmp_path / "history").stat().st_mode & 0o077 == 0  # readable by its owner only


def test_run_script_runs_a_file_as_one_script(terminal, tmp_path):
    (tmp_path / "good.sql").write_text("CREATE STREAM a (x INT);\nCREATE STREAM b (y INT);\n")
    (tmp_path / "bad.sql").write_text("CREATE STREAM c (x INT);\nSELECT nope;\n")
    shell = terminal()
    assert "Created stream B" in shell.run(f"RUN SCRIPT '{tmp_path}/good.sql';")
    assert "a SELECT needs FROM" in shell.run(f"RUN SCRIPT '{tmp_path}/bad.sql';")
    assert "unknown stream or table 'C'" in shell.run("DESCRIBE c;")  # nothing of it applied
    assert "cannot read" in shell.run(f"RUN SCRIPT '{tmp_path}/none.sql';")
    assert "RUN SCRIPT takes one quoted file name" in shell.run("RUN SCRIPT good;")
    assert shell.leave() == 0


def test_json_mode_prints_a_json_line_per_request(sqlite_engine, terminal):
    sqlite_engine.execute(SETUP)
    shell = terminal("shell", "--json")
    [line] = [x for x in shell.run("SHOW STREAMS; SHOW TABLES;").splitlines() if x.startswith("[")]
    assert [r["rows"] for r in json.loads(line)] == [[["PURCHASES", "JSON", None]], [["STOCK", "JSON", None]]]
    [error] = [x for x in shell.run("SELECT nope;").splitlines() if x.startswith("{")]
    assert json.loads(error) | {"error": ""} == {"error": "", "type": "ValidationError", "line": 1, "col": 8}
    assert shell.leave() == 0


@pytest.mark.parametrize("args, typed, out", [
    # without a terminal: no prompts, each request's JSON on a line of its own
    (["shell", "--json"], "SHOW STREAMS;\nSHOW TABLES;\n", [["PURCHASES"], ["STOCK"]]),
    # what is left without its ';' at the end of the input runs, as exec runs it
    (["--json"], "SHOW STREAMS;\nSHOW TABLES -- the end", [["PURCHASES"], ["STOCK"]]),
])
def test_the_shell_reads_a_pipe_without_prompts(sqlite_engine, env, args, typed, out):
    sqlite_engine.execute(SETUP)
    done = subprocess.run(CLI + args, input=typed, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [[row[0] for r in json.loads(line) for row in r["rows"]] for line in done.stdout.splitlines()] == out


def test_shell_f_runs_the_file_as_exec_f_and_leaves(env, tmp_path):
    (tmp_path / "s.sql").write_text("CREATE STREAM a (x INT); SELECT nope;")
    done = subprocess.run(CLI + ["shell", "-f", str(tmp_path / "s.sql")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr.strip()) == (2, "error: line 1, column 33: a SELECT needs FROM "
                                                         "<stream or table>\n  near: SELECT nope")


NAMES = Names({"PURCHASES": ("id", "item", "cost"), "STOCK": ("item", "n")}, ("CSAS_BIG_1",))


@pytest.mark.parametrize("before, prefix, after, words", [
    ("", "DESC", "", ["DESCRIBE"]),
    ("", "cr", "", ["create"]),  # in the case it is typed in
    ("CREATE ", "", "", ["OR", "STREAM", "TABLE"]),
    ("CREATE OR REPLACE ", "T", "", ["TABLE"]),
    ("SHOW ", "S", "", ["SNAPSHOTS", "STREAMS"]),
    ("", "RU", "", ["RUN"]),
    ("RUN ", "", "", ["SCRIPT"]),
    ("DESCRIBE ", "", "", ["CSAS_BIG_1", "PURCHASES", "STOCK"]),  # a source or a query
    ("select * from ", "p", "", ["purchases"]),
    ("DROP TABLE ", "S", "", ["STOCK"]),
    ("PAUSE ", "", "", ["ALL", "CSAS_BIG_1"]),
    ("EXPLAIN ", "C", "", ["CSAS_BIG_1"]),
    ("SELECT * FROM purchases WHERE ", "co", "", ["cost"]),  # a column of the source named
    ("SELECT ", "i", " FROM stock", ["item"]),  # ... after the cursor too
    ("SELECT * FROM stock s JOIN purchases p ON s.item = p.", "i", "", ["id", "item"]),  # both sources
    ("SHOW STREAMS;\nDESCRIBE ", "S", "", ["STOCK"]),  # the statement the cursor is in
    ("SELECT 'open quote ", "F", "", []),
])
def test_completion_offers_what_may_come_next(before, prefix, after, words):
    assert candidates(before, prefix, NAMES, after) == words


@pytest.mark.parametrize("text, ended, whole", [
    ("SHOW STREAMS;", ["SHOW STREAMS"], True),
    ("SHOW STREAMS; SHOW TABLES;", ["SHOW STREAMS", "SHOW TABLES"], True),
    ("SHOW STREAMS; SHOW", ["SHOW STREAMS"], False),
    ("SELECT 'a;b'", [], False),
    ("SELECT 'a;", [], False),  # an open quote
    ("SELECT 1 /* ; ", [], False),  # an open comment
    ("SELECT 1; -- a comment", ["SELECT 1"], True),
    ("-- only a comment", [], True),
    (";;", [], True),
])
def test_cut_says_whether_typed_in_text_is_a_whole_request(text, ended, whole):
    request = cut(text)
    assert ([p.text for p in request.ended], request.whole) == (ended, whole)


@pytest.mark.parametrize("text, file", [
    ("RUN SCRIPT 'a b.sql'", "a b.sql"),
    ("run script '/tmp/x.sql'", "/tmp/x.sql"),
    ("SHOW STREAMS", None),
])
def test_run_script_names_its_file(text, file):
    assert cut(text + ";").ended[0].script_file() == file


@pytest.mark.parametrize("text", ["RUN SCRIPT", "RUN SCRIPT x", "RUN SCRIPT 'a' 'b'", "RUN SCRIPT ''"])
def test_run_script_without_one_quoted_file_is_a_clear_error(text):
    with pytest.raises(ParseError, match="RUN SCRIPT takes one quoted file name"):
        cut(text + ";").ended[0].script_file()
