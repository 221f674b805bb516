"""Properties of the ``streamql exec`` command over generated input (hypothesis).

Whatever the text: the command returns an exit code (never a traceback), 0 or 2 (1 only for
an I/O failure), and when it is not 0 the catalog and the files under the home are exactly
as they were. Three kinds of text: statements drawn from the grammar (with hostile names,
paths and literals), scripts of several of them, and random token soup.

Each test function reuses one home and catalog, pre-populated with two streams, a table and a
query (no Spark: queries are only written to the catalog). Nothing is restored between
examples: the property is exactly that a failure changes nothing.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_streamql.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main

from .test_errors import catalog_dump, home_listing

SETUP = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE, ts TIMESTAMP, day DATE, n TINYINT);
CREATE STREAM clicks (id INT, url STRING, ts TIMESTAMP)
  WITH (timestamp='ts', timestamp_format='yyyy-MM-dd HH:mm:ss', value_format='CSV');
CREATE TABLE prices (sku STRING PRIMARY KEY, price DECIMAL(6, 2));
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
INSERT INTO purchases VALUES (1, 'ann', 5.0, '2024-01-01 00:00:00', '2024-01-01', 1);
INSERT INTO clicks VALUES (1, '/a', '2024-01-01 00:00:00');
INSERT INTO prices VALUES ('a', 1.5);
"""
# Sources the generated statements may write to (INSERT) and read (SELECT): their paths are
# the fixture's own, so no generated path can send a write or a read anywhere else, whatever
# the path rules of the day (the tests run as root in CI).
FIXED = ["purchases", "clicks", "prices", "valid"]
COLUMNS = ["id", "user", "cost", "ts", "day", "n", "url", "sku", "price"]
SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])

# -- the grammar ----------------------------------------------------------------------------
plain = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
HOSTILE_NAMES = ["`a/b`", "`..`", "`.`", "`a\nb`", "`ab\n`", "a.b", "n" * 129, "`" + "y" * 300 + "`",
                 "`é`", "`a b`", "`1a`", "``", "`select`", "`topics`", "`catalog.db`", "`\u202e`",
                 "`a\\`b`", "_", "SELECT", "ALL", "`ALL`"]
fresh = st.from_regex(r"[a-z][a-z0-9_]{3,10}", fullmatch=True).filter(lambda n: n not in FIXED)
# mostly names that can be created (so that statements succeed and the catalog grows), some
# that exist already, some hostile
new_name = st.one_of(fresh, fresh, st.sampled_from(["s1", "s2", "t1", "t2", "x", "S1"]),
                     plain.filter(lambda n: n.lower() not in FIXED), st.sampled_from(HOSTILE_NAMES))
any_name = st.one_of(new_name, st.sampled_from(FIXED))
query_id = st.one_of(st.sampled_from(["CSAS_VALID_4", "csas_valid_4", "CSAS_S1_8", "ALL", "INSERTQUERY_9"]),
                     plain, st.sampled_from(HOSTILE_NAMES))
TYPES = ["INT", "BIGINT", "TINYINT", "SMALLINT", "DOUBLE", "FLOAT", "STRING", "BOOLEAN", "DATE",
         "TIMESTAMP", "DECIMAL(10, 2)", "DECIMAL(38,0)", "ARRAY<STRING>", "MAP<STRING, INT>",
         "STRUCT<a: INT, b: STRING>", "INTT", "DECIMAL(99, 2)", "ARRAY<", "VARCHAR(10)", "BINARY"]
HOSTILE_PATHS = [".", "..", "/etc", "/", "topics", "catalog.db", "topics/PURCHASES", "PURCHASES",
                 "../outside", "a/../../b", "x" * 300, "", "in/s", "~", "a\\b", "\n", "./.", "a\x00b",
                 "/tmp/../etc", "CLICKS/sub", "\u00e9t\u00e9"]


def sql_string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes, as sqlglot's Spark tokenizer reads them)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


NUMBERS = ["0", "-1", "127", "128", "-129", "2147483648", "99999999999999999999", "9" * 39,
           "1e999", "-1e999", "1e-999", "1.5", "3.4e39", "1e308", "0.000001", "1e", "00012", "9" * 5000]
STRINGS = ["2024-01-01 00:00:00", "2024-01-01T00:00:00Z", "2024-02-30", "2024-01-01", "not a timestamp",
           "2024-01-01 00:00:00+19:00", "", "'", "\\", "a\nb", "\U0001f600", "x" * 1000]
literal = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(NUMBERS),
    st.one_of(st.sampled_from(STRINGS), st.text(max_size=20)).map(sql_string),
    st.sampled_from(["TRUE", "FALSE", "NULL", "DATE '2024-01-01'", "x", "-'a'", "(1)"]))
prop_value = st.one_of(literal, st.sampled_from(HOSTILE_PATHS).map(sql_string),
                       st.sampled_from(["'JSON'", "'CSV'", "'PARQUET'", "'XML'", "'json'", "'ts'",
                                        "'yyyy-MM-dd HH:mm:ss'", "'dd/MM/yyyy hh:mm a'", "'FAIL'",
                                        "'PAUSE'", "'topic-a'", "'a,b'"]))
prop_key = st.one_of(st.sampled_from(["path", "path", "value_format", "kafka_topic", "timestamp",
                                      "timestamp_format", "on_error", "colour", "PATH",
                                      "`kafka.bootstrap.servers`", "bootstrap_servers"]), plain)
sane_properties = st.sampled_from(["", "", " WITH (value_format='CSV')", " WITH (value_format='PARQUET')",
                                   " WITH (path='in/s')", " WITH (on_error='PAUSE')"])
properties = st.one_of(sane_properties, sane_properties, st.lists(st.tuples(prop_key, prop_value), max_size=4).map(
    lambda items: "" if not items else " WITH (" + ", ".join(f"{k}={v}" for k, v in items) + ")"))


SANE_TYPES = ["INT", "BIGINT", "DOUBLE", "STRING", "BOOLEAN", "DATE", "TIMESTAMP", "DECIMAL(10, 2)"]
sane_columns = st.lists(st.tuples(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.sampled_from(SANE_TYPES)),
                        min_size=1, max_size=5, unique_by=lambda c: c[0]).map(
    lambda cols: "(" + ", ".join(f"{n} {t}" + (" PRIMARY KEY" if i == 0 else "") for i, (n, t) in enumerate(cols)) + ")")


@st.composite
def column_list(draw) -> str:
    if draw(st.integers(0, 2)):
        return draw(sane_columns)
    cols = draw(st.lists(st.tuples(st.one_of(st.sampled_from(COLUMNS), plain, st.sampled_from(HOSTILE_NAMES)),
                                   st.sampled_from(TYPES), st.sampled_from(["", " KEY", " PRIMARY KEY"])),
                         min_size=1, max_size=5))
    return "(" + ", ".join(f"{n} {t}{k}" for n, t, k in cols) + ")"


expression = st.recursive(
    st.one_of(st.sampled_from(COLUMNS), literal, st.sampled_from(["*", "COUNT(*)", "CURRENT_TIMESTAMP()"])),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%", "=", "<>", ">", "AND", "OR", "||"]), inner)
        .map(" ".join),
        inner.map(lambda e: f"({e})"), inner.map(lambda e: f"NOT {e}"),
        st.tuples(st.sampled_from(["SUM", "UPPER", "ABS", "CAST", "COALESCE", "NOPE"]), inner)
        .map(lambda t: f"CAST({t[1]} AS INT)" if t[0] == "CAST" else f"{t[0]}({t[1]})")),
    max_leaves=6)


@st.composite
def select(draw, sources) -> str:
    items = draw(st.lists(st.tuples(expression, st.one_of(st.just(""), plain.map(" AS ".__add__),
                                                          st.sampled_from(HOSTILE_NAMES).map(" AS ".__add__))),
                          min_size=1, max_size=3))
    text = "SELECT " + ", ".join(e + a for e, a in items) + " FROM " + draw(sources)
    if draw(st.booleans()):
        text += " WHERE " + draw(expression)
    clause = draw(st.sampled_from(["", " GROUP BY user", " WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user",
                                   " WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 2 MINUTES) GROUP BY id",
                                   " WINDOW SESSION (1e999 SECONDS) GROUP BY id", " LIMIT 3", " LIMIT -1",
                                   " EMIT CHANGES", " EMIT SOMETIMES"]))
    return text + clause


# selects that are right against the fixture: so that queries get created, paused, dropped
SANE_SELECTS = {"STREAM": ["SELECT * FROM purchases", "SELECT id, user FROM purchases WHERE cost > 1",
                           "SELECT id, UPPER(user) AS u FROM valid EMIT CHANGES", "SELECT * FROM clicks"],
                "TABLE": ["SELECT user, COUNT(*) AS n FROM purchases GROUP BY user",
                          "SELECT id, SUM(cost) AS total FROM valid WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id"]}
sane_create_as = st.builds(lambda r, k, n, i: f"CREATE {r}{k} {n} AS {SANE_SELECTS[k][i % len(SANE_SELECTS[k])]}",
                           st.sampled_from(["", "OR REPLACE "]), st.sampled_from(["STREAM", "TABLE"]), fresh,
                           st.integers(0, 3))
kind = st.sampled_from(["STREAM", "TABLE", "stream", "VIEW"])
def create_text(replace: str, kind: str, name: str, columns: str, props: str) -> str:
    if kind == "STREAM":  # a table's key is PRIMARY KEY, a stream's KEY ('stream' keeps the mismatch)
        columns = columns.replace(" PRIMARY KEY", " KEY")
    return f"CREATE {replace}{kind} {name} {columns}{props}"


create_source = st.builds(create_text, st.sampled_from(["", "OR REPLACE "]), kind, new_name, column_list(), properties)
create_as = st.one_of(sane_create_as, sane_create_as, st.builds(lambda r, k, n, p, s: f"CREATE {r}{k} {n}{p} AS {s}", st.sampled_from(["", "OR REPLACE "]),
                      kind, new_name, properties, select(st.one_of(st.sampled_from(FIXED), new_name))))
# a whole row of purchases, each value of its column's type or near it
purchase_row = st.tuples(
    st.one_of(st.integers(-2**31, 2**31 - 1), st.sampled_from([2**31, -2**31 - 1, 2**63])).map(str),
    st.one_of(st.text(max_size=10).map(sql_string), st.just("NULL")),
    st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr), st.sampled_from(["1e999", "1e308", "NULL"])),
    st.one_of(st.datetimes().map(lambda d: sql_string(d.isoformat(sep=" "))), st.sampled_from(STRINGS).map(sql_string)),
    st.one_of(st.dates().map(lambda d: sql_string(d.isoformat())), st.sampled_from(["'2024-02-30'", "'24-1-1'", "NULL"])),
    st.one_of(st.integers(-130, 130).map(str), st.just("NULL")),
).map(lambda row: "INSERT INTO purchases VALUES (" + ", ".join(row) + ")")
insert_values = st.one_of(purchase_row, purchase_row, st.builds(
    lambda t, c, v: f"INSERT INTO {t}{c} VALUES ({', '.join(v)})", st.sampled_from(FIXED),
    st.one_of(st.just(""), st.lists(st.one_of(st.sampled_from(COLUMNS), st.sampled_from(HOSTILE_NAMES)),
                                    min_size=1, max_size=6).map(lambda cs: " (" + ", ".join(cs) + ")")),
    st.lists(literal, min_size=1, max_size=6)))
insert_select = st.builds(lambda t, s: f"INSERT INTO {t} {s}", any_name, select(st.sampled_from(FIXED)))
pull = st.one_of(st.sampled_from(SANE_SELECTS["STREAM"][:2] + ["SELECT * FROM prices", "SELECT sku FROM prices LIMIT 1"]),
                 select(st.sampled_from(FIXED)))
control = st.builds(lambda a, q, s: f"{a} {q}{s}", st.sampled_from(["PAUSE", "RESUME", "TERMINATE"]), query_id,
                    st.sampled_from(["", " SKIP BAD RECORDS"]))
drop = st.builds(lambda k, e, n, d: f"DROP {k} {e}{n}{d}", kind, st.sampled_from(["", "IF EXISTS "]), any_name,
                 st.sampled_from(["", " DELETE TOPIC"]))
alter = st.builds(lambda k, n, c, t: f"ALTER {k} {n} ADD COLUMN {c} {t}", kind, any_name,
                  st.one_of(plain, st.sampled_from(HOSTILE_NAMES)), st.sampled_from(TYPES))
show = st.builds(lambda w, e: f"SHOW {w}{e}", st.sampled_from(["STREAMS", "TABLES", "QUERIES", "THINGS"]),
                 st.sampled_from(["", " EXTENDED"]))
describe = st.builds(lambda n, e: f"DESCRIBE {n}{e}", any_name, st.sampled_from(["", " EXTENDED"]))
explain = query_id.map("EXPLAIN ".__add__)
set_property = st.builds(lambda k, v: f"SET {k} = {v}",
                         st.one_of(st.just("'auto.offset.reset'"), literal), st.one_of(st.just("'earliest'"), literal))
statement = st.one_of(create_source, create_as, insert_values, insert_select, pull, control, drop, alter,
                      show, describe, explain, set_property)
script = st.lists(statement, min_size=2, max_size=5).flatmap(
    lambda stmts: st.sampled_from([";", ";\n", " ; ", ";;"]).map(lambda sep: sep.join(stmts)))

SOUP = ["CREATE", "STREAM", "TABLE", "AS", "SELECT", "FROM", "WHERE", "WITH", "INSERT", "INTO", "VALUES",
        "DROP", "DELETE", "TOPIC", "PAUSE", "RESUME", "TERMINATE", "ALL", "SHOW", "DESCRIBE", "EXPLAIN",
        "SET", "KEY", "PRIMARY", "WINDOW", "TUMBLING", "SIZE", "EMIT", "CHANGES", "GROUP", "BY", "NOT",
        "NULL", "(", ")", "(", ")", ",", ";", "=", "'", '"', "`", "'a'", "`b`", "*", ".", "/", "-", "--",
        "/*", "*/", "<", ">", "1", "1e999", "9" * 40, "0.5", "\n", "\t", "é", "\U0001f600", "\\", "$", "{", "}",
        "[", "]", "purchases", "valid", "CSAS_VALID_4", "path='.'", "x" * 200]
soup = st.lists(st.one_of(st.sampled_from(SOUP), st.text(max_size=8)), max_size=40).flatmap(
    lambda parts: st.sampled_from([" ", "", "\n"]).map(lambda sep: sep.join(parts)))


# -- the property ---------------------------------------------------------------------------
class Home:
    """One home and catalog, set up once per test function and never restored."""

    def __init__(self, path, capsys):
        self.home = str(path / "home")
        self.url = f"sqlite:///{self.home}/catalog.db"  # the default layout: the catalog in the home
        self.capsys = capsys
        code, err = self.exec(SETUP)
        assert code == EXIT_OK, err

    def exec(self, sql: str) -> tuple[int, str]:
        self.capsys.readouterr()
        code = main(["exec", "--home", self.home, "--catalog", self.url, "--", sql])
        _out, err = self.capsys.readouterr()
        return code, err

    def files(self) -> list:
        # the catalog's own file is compared row by row (catalog_dump), not byte by byte
        return [f for f in home_listing(self.home) if "catalog.db" not in f[0].rsplit("/", 1)[-1]]

    def check(self, sql: str) -> None:
        before, files = catalog_dump(self.url), self.files()
        code, err = self.exec(sql)
        assert isinstance(code, int), f"main returned {code!r} for {sql!r}"
        assert "Traceback" not in err, err
        assert code in (EXIT_OK, EXIT_USAGE, EXIT_FAILED), (code, err)
        if code == EXIT_FAILED:  # only an I/O failure may exit 1
            assert "Errno" in err, err
        if code != EXIT_OK:
            assert err.startswith("error: "), err
            assert catalog_dump(self.url) == before, f"{sql!r} failed ({err.strip()}) but changed the catalog"
            assert self.files() == files, f"{sql!r} failed ({err.strip()}) but changed files"


@pytest.fixture
def pipeline(tmp_path, capsys):
    return Home(tmp_path, capsys)


@SETTINGS
@given(sql=statement)
def test_a_statement_fails_cleanly_or_succeeds(pipeline, sql):
    pipeline.check(sql)


@SETTINGS
@given(sql=script)
def test_a_script_fails_whole(pipeline, sql):
    pipeline.check(sql)


@SETTINGS
@given(sql=soup)
def test_token_soup_is_an_error_not_a_traceback(pipeline, sql):
    pipeline.check(sql)
