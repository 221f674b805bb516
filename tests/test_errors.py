"""Findings of the security review, one line each: what the CLI was given -> its exit code and
a fragment of its error. Each runs through the real CLI entry point in-process, on SQLite and
on PostgreSQL, and asserts a clear message, no traceback, and that nothing was written."""
import hashlib
import os

import pytest
from sqlalchemy import select

from airflow_provider_streamql.catalog import schema
from airflow_provider_streamql.cli import EXIT_USAGE, main
from airflow_provider_streamql.errors import ValidationError, first_line
from airflow_provider_streamql.language.statements import Column
from airflow_provider_streamql.storage import topics

SETUP = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE, ts TIMESTAMP, day DATE);
CREATE STREAM clicks (id INT, ts TIMESTAMP) WITH (timestamp='ts', timestamp_format='yyyy-MM-dd HH:mm:ss');
CREATE TABLE prices (sku STRING PRIMARY KEY, price DECIMAL(6, 2));
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
INSERT INTO purchases VALUES (1, 'ann', 5.0, '2024-01-01 00:00:00', '2024-01-01');
"""
NOT_UTF8 = b"SHOW STREAMS;\n-- caf\xe9\n"  # Latin-1 text: byte 0xe9 at offset 20

# (finding, CLI arguments: FILE is a file holding NOT_UTF8) -> (exit code, fragment of stderr)
FINDINGS = [
    # tracebacks instead of errors
    ("200 nested parentheses", ["SELECT " + "(" * 200 + "id" + ")" * 200 + " FROM purchases"],
     EXIT_USAGE, "line 1, column 40: statement too deeply nested: more than 32 levels"),
    ("a chain of 3,000 NOTs (RecursionError inside sqlglot)", ["SELECT " + "NOT " * 3000 + "id FROM purchases"],
     EXIT_USAGE, "statement too deeply nested or too long"),
    ("exec -f FILE that is not UTF-8", ["-f", "FILE"], EXIT_USAGE,
     "cannot read 'FILE': not UTF-8 text (byte 0xe9 at offset 20)"),
    ("plan FILE that is not UTF-8", ["plan", "FILE"], EXIT_USAGE, "not UTF-8 text (byte 0xe9 at offset 20)"),
    ("apply FILE that is not UTF-8", ["apply", "FILE"], EXIT_USAGE, "not UTF-8 text (byte 0xe9 at offset 20)"),
    ("apply --teardown FILE that is not UTF-8", ["apply", "EMPTY", "--teardown", "FILE"], EXIT_USAGE,
     "not UTF-8 text (byte 0xe9 at offset 20)"),
    ("INSERT VALUES (1e999, ...): OverflowError", ["INSERT INTO purchases (id, cost) VALUES (1e999, 1.0)"],
     EXIT_USAGE, "line 1, column 42: number '1e999' is out of range of a DOUBLE"),
    # silently accepted
    ("'not a timestamp' into a TIMESTAMP", ["INSERT INTO purchases (id, ts) VALUES (2, 'not a timestamp')"],
     EXIT_USAGE, "value 'not a timestamp' does not fit column 'ts' of type TIMESTAMP (expected "
                 "yyyy-MM-dd HH:mm:ss[.SSS])"),
    ("99999999999999999999 into an INT", ["INSERT INTO purchases (id) VALUES (99999999999999999999)"],
     EXIT_USAGE, "value 99999999999999999999 does not fit column 'id' of type INT (expected a whole "
                 "number from -2147483648 to 2147483647)"),
    ("(a, a) as an INSERT column list", ["INSERT INTO purchases (id, user, ID) VALUES (1, 'a', 2)"],
     EXIT_USAGE, "line 1, column 34: column 'ID' is listed twice"),
    ("an identifier with a trailing newline", ["CREATE STREAM `ab\n` (id INT)"],
     EXIT_USAGE, "'ab\\n' is not a plain SQL name"),
    ("a name longer than 128 characters", [f"CREATE STREAM {'n' * 129} (id INT)"],
     EXIT_USAGE, "a name has at most 128 characters; this one has 129"),
    # the same roots, one step further
    ("a column name longer than 128 characters", [f"INSERT INTO purchases ({'c' * 200}) VALUES (1)"],
     EXIT_USAGE, "a name has at most 128 characters; this one has 200"),
    ("a timestamp not in the source's timestamp_format", ["INSERT INTO clicks VALUES (1, '2024-01-01T00:00:00')"],
     EXIT_USAGE, "value '2024-01-01T00:00:00' does not fit column 'ts' of type TIMESTAMP (expected "
                 "yyyy-MM-dd HH:mm:ss)"),
    ("a date that is not in the calendar", ["INSERT INTO purchases (id, day) VALUES (2, '2023-02-29')"],
     EXIT_USAGE, "value '2023-02-29' does not fit column 'day' of type DATE (expected yyyy-MM-dd)"),
    ("a number wider than its DECIMAL", ["INSERT INTO prices VALUES ('a', 10000)"],
     EXIT_USAGE, "value 10000 does not fit column 'price' of type DECIMAL(6, 2)"),
    ("a 39-digit number", ["SELECT id FROM purchases WHERE id = " + "9" * 39],
     EXIT_USAGE, "is more than 38 digits"),
    ("quoted text as a unit of EXTRACT (the pull-query injection)",
     ["SELECT extract(`'x' + str(__import__('os').system('id')) + 'y'` FROM id) AS j FROM purchases"],
     EXIT_USAGE, "is not a unit or keyword"),
    ("quoted text as a unit of a persistent query's TIMESTAMPADD",
     ["CREATE STREAM t AS SELECT timestampadd(`x); y`, 1, day) AS j FROM purchases"],
     EXIT_USAGE, "'X); Y' is not a unit or keyword"),
    ("a NUL byte (PostgreSQL cannot store it)", ["CREATE STREAM n (id INT) WITH (path='a\x00b')"],
     EXIT_USAGE, "line 1, column 39: the text holds a NUL character"),
]


def catalog_dump(url: str) -> dict:
    """Every row of every catalog table: 'nothing written' means this did not change."""
    from airflow_provider_streamql.catalog import Catalog
    catalog = Catalog(url)
    try:
        with catalog.engine.connect() as conn:
            return {t.name: sorted(map(repr, conn.execute(select(t)))) for t in schema.metadata.sorted_tables}
    finally:
        catalog.close()


def home_listing(home: str) -> list:
    """Every file and folder under ``home``, with the size and hash of each file."""
    listing = []
    for folder, dirs, files in os.walk(home):
        listing += [(os.path.join(folder, d), "dir") for d in dirs]
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                listing.append((path, os.path.getsize(path), hashlib.sha256(f.read()).hexdigest()))
    return sorted(listing, key=repr)


def run_cli(capsys, args: list[str]) -> tuple[int, str, str]:
    """``streamql ...`` in-process: (exit code, stdout, stderr); a traceback fails the test."""
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert isinstance(code, int), f"main returned {code!r}"
    assert "Traceback" not in err + out
    return code, out, err


@pytest.mark.parametrize("finding, args, code, fragment", FINDINGS, ids=[f[0] for f in FINDINGS])
def test_finding_is_a_clear_error_and_writes_nothing(engine, home, tmp_path, capsys, finding, args, code, fragment):
    engine.execute(SETUP)
    (tmp_path / "bad.sql").write_bytes(NOT_UTF8)
    (tmp_path / "empty.sql").write_text("")
    files = {"FILE": str(tmp_path / "bad.sql"), "EMPTY": str(tmp_path / "empty.sql")}
    args = [files.get(a, a) for a in args]
    command = args[0] if args[0] in ("plan", "apply") else "exec"
    args = args[1:] if command != "exec" else args
    before, listing = catalog_dump(engine.catalog.url), home_listing(home)

    exit_code, _out, err = run_cli(capsys, [command, "--home", home, "--catalog", engine.catalog.url, *args])

    assert exit_code == code, err
    assert err.startswith("error: ")
    assert fragment.replace("'FILE'", repr(files["FILE"])) in err
    assert catalog_dump(engine.catalog.url) == before
    assert home_listing(home) == listing


# (value, column type, timestamp_format) -> the stored value, or a fragment of the error
COERCIONS = [
    (127, "TINYINT", None, 127), (-128, "TINYINT", None, -128), (128, "TINYINT", None, "from -128 to 127"),
    (-32769, "SMALLINT", None, "from -32768 to 32767"), (2**31, "INT", None, "to 2147483647"),
    (-2**63, "BIGINT", None, -2**63), (2**63, "BIGINT", None, "to 9223372036854775807"),
    (3.0, "INT", None, 3), (3.5, "INT", None, "a whole number"), (True, "INT", None, "a whole number"),
    (1e300, "DOUBLE", None, 1e300), (1e39, "FLOAT", None, "finite number"), (float("inf"), "DOUBLE", None, "finite"),
    (float("nan"), "DOUBLE", None, "finite"), (9999.99, "DECIMAL(6, 2)", None, 9999.99),
    (-10000, "DECIMAL(6, 2)", None, "at most 4 digits before the point"),
    (1e10, "DECIMAL", None, "at most 10 digits"), (float("inf"), "DECIMAL(38, 0)", None, "at most 38 digits"),
    ("2024-02-29", "DATE", None, "2024-02-29"), ("2024-2-29", "DATE", None, "expected yyyy-MM-dd"),
    ("2024-13-01", "DATE", None, "expected yyyy-MM-dd"), (20240101, "DATE", None, "expected yyyy-MM-dd"),
    ("2024-01-01", "TIMESTAMP", None, "2024-01-01"),
    ("2024-01-01 23:59:59", "TIMESTAMP", None, "2024-01-01 23:59:59"),
    ("2024-01-01T23:59:59.123456Z", "TIMESTAMP", None, "2024-01-01T23:59:59.123456Z"),
    ("2024-01-01T00:00:00+05:30", "TIMESTAMP", None, "2024-01-01T00:00:00+05:30"),
    ("2024-01-01 24:00:00", "TIMESTAMP", None, "expected yyyy-MM-dd HH:mm:ss[.SSS]"),
    ("2024-01-01 00:00:00+19:00", "TIMESTAMP", None, "expected yyyy-MM-dd HH:mm:ss[.SSS]"),
    ("2024-01-01 00:00:00\n", "TIMESTAMP", None, "expected yyyy-MM-dd HH:mm:ss[.SSS]"),
    ("01/02/2024 10:11", "TIMESTAMP", "dd/MM/yyyy HH:mm", "01/02/2024 10:11"),
    ("31/02/2024 10:11", "TIMESTAMP", "dd/MM/yyyy HH:mm", "expected dd/MM/yyyy HH:mm"),
    ("2024-01-01T10:11:12.123", "TIMESTAMP", "yyyy-MM-dd'T'HH:mm:ss.SSS", "2024-01-01T10:11:12.123"),
    ("2024-01-01T10:11:12.12", "TIMESTAMP", "yyyy-MM-dd'T'HH:mm:ss.SSS", "expected yyyy-MM-dd'T'HH:mm:ss.SSS"),
    ("2024-01-01 10:11:12", "TIMESTAMP", "yyyy-MM-dd hh:mm:ss a", "pattern letters 'hh' are not supported"),
    ("x", "BOOLEAN", None, "expected TRUE or FALSE"), (1, "STRING", None, "expected a string"),
]


@pytest.mark.parametrize("value, type_, timestamp_format, expected", COERCIONS)
def test_coerce_checks_ranges_and_formats(value, type_, timestamp_format, expected):
    column = Column.of("c", type_)
    if isinstance(expected, str) and (not isinstance(value, str) or value != expected):
        with pytest.raises(ValidationError) as info:
            topics.coerce(value, column, timestamp_format=timestamp_format)
        assert expected in info.value.message
        assert "'c'" in info.value.message or "pattern letters" in info.value.message
    else:
        assert topics.coerce(value, column, timestamp_format=timestamp_format) == expected


PROXY_ERROR = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
    '  File "/venv/py4j/clientserver.py", line 644, in _call_proxy\n'
    "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
    "pyspark.errors.exceptions.captured.NumberFormatException: [CAST_INVALID_INPUT] The value 'bob' of the "
    'type "STRING" cannot be cast to "INT" because it is malformed.\n'
    "== SQL (line 1, position 12) =="
)

#: a foreachBatch writer's call into Spark failed: Py4J heads the Java exception it passes on
SAVE_ERROR = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
    '  File "/venv/pyspark/sql/readwriter.py", line 1839, in save\n'
    "    self._jwrite.save()\n"
    "py4j.protocol.Py4JJavaError: An error occurred while calling o4984.save.\n"
    ": org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are "
    "not available in Kafka any more;\n"
    "either the data was aged out by Kafka or the topic may have been deleted before all the data in the\n"
)


@pytest.mark.parametrize("message, shown", [
    ("[CAST_INVALID_INPUT] The value 'bob' cannot be cast\n\tat org.apache.spark...",
     "[CAST_INVALID_INPUT] The value 'bob' cannot be cast"),
    (PROXY_ERROR, "[CAST_INVALID_INPUT] The value 'bob' of the type \"STRING\" cannot be cast to \"INT\" "
                  "because it is malformed."),
    (SAVE_ERROR, "org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because "
                 "they are not available in Kafka any more;"),
    ("An exception was raised by the Python Proxy. Return Message: nothing more",
     "An exception was raised by the Python Proxy. Return Message: nothing more"),
    ("", "RuntimeError"),
])
def test_a_query_error_is_reported_by_its_own_first_line(message, shown):
    assert first_line(RuntimeError(message)) == shown


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5"])
def test_runtime_workers_must_be_a_whole_number_of_at_least_one(capsys, value):
    with pytest.raises(SystemExit) as stopped:
        main(["runtime", "--workers", value])
    assert stopped.value.code == 2
    assert f"--workers: a whole number of at least 1, not {value!r}" in capsys.readouterr().err


# A library's error holding a URL with a password: the password's two words (Qq1, Zz2) never
# reach the first line the CLI, the runtime or the UI shows, whatever separates them.
# (the password as the URL in the message spells it)
URL_PASSWORDS = [
    "Qq1 Zz2", "Qq1\tZz2", "Qq1\nZz2", "Qq1\r\nZz2", "Qq1 \n Zz2", "Qq1%20Zz2", "Qq1%0AZz2", "Qq1+Zz2",
    "'Qq1 Zz2'", '"Qq1 Zz2"', "Qq1'Zz2", 'Qq1" Zz2', " Qq1Zz2", "Qq1Zz2 ", "Qq1 @Zz2", "Qq1/ Zz2",
    "Qq1\\nZz2",  # a newline as a repr shows it
]


@pytest.mark.parametrize("password", URL_PASSWORDS)
@pytest.mark.parametrize("template", [
    "connection to postgresql+psycopg://streamql:{pw}@db:5432/streamql failed",
    "could not parse 'postgresql://my user:{pw}@db/streamql'\nsecond line",
    "two URLs: http://a:{pw}@db/x and postgresql://b:{pw}@db/y",
])
def test_a_password_in_a_url_is_masked_in_an_error_first_line(password, template):
    from airflow_provider_streamql.catalog.urls import error_line
    from airflow_provider_streamql.plugins.app import _first_line
    error = RuntimeError(template.format(pw=password))
    for shown in (error_line(error), _first_line(error)):
        assert "Qq1" not in shown and "Zz2" not in shown, shown
        assert ":***@db" in shown and "\n" not in shown


# (the catalog URL, how a driver's message may carry its password): masked as the catalog's own
KNOWN_PASSWORDS = [
    ("postgresql://u:Qq1%20Zz2@db/x", "password authentication failed: 'Qq1 Zz2'"),
    ("postgresql://u:Qq1%0AZz2@db/x", "password authentication failed: 'Qq1\nZz2'"),
    ("postgresql://u:Qq1%0AZz2@db/x", "password authentication failed: 'Qq1\\nZz2'"),
    ("postgresql://u:Qq1%0D%0AZz2@db/x", "password 'Qq1\r\nZz2' refused"),
    ("postgresql://u:Qq1%09Zz2@db/x", "password 'Qq1\tZz2' refused"),
    ("postgresql://u:Qq1%09Zz2@db/x", "password 'Qq1%09Zz2' refused"),
    ("postgresql://u:Qq1%20Zz2@db/x", "password 'Qq1+Zz2' refused"),
    ("postgresql://u:%22Qq1%20Zz2%27@db/x", "password '\"Qq1 Zz2'' refused"),
]


@pytest.mark.parametrize("url, message", KNOWN_PASSWORDS)
def test_the_catalog_password_is_masked_in_an_error_first_line(url, message):
    from airflow_provider_streamql.catalog.urls import error_line
    shown = error_line(RuntimeError(message), url)
    assert "Qq1" not in shown and "Zz2" not in shown and "***" in shown, shown


@pytest.mark.parametrize("message", ["connection to postgresql://streamql@db:5432/x refused",
                                     "postgresql://db:5432/x: no such database", "mail admin@example.com"])
def test_a_message_without_a_password_is_shown_as_it_is(message):
    from airflow_provider_streamql.catalog.urls import error_line
    assert error_line(RuntimeError(message)) == message
