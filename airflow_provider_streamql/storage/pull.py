"""Pull queries: evaluate a SELECT over what a stream or table holds now, without Spark.

Each pull query gets a fresh in-memory DuckDB, locked before its first statement
(:mod:`.sandbox`: no file or network access but to the committed files of the sources the
SELECT reads, no extensions, no configuration changes). Those files are loaded into tables
(a stream: its rows; a table: the latest row per key, see :mod:`.topics`), then the SELECT
runs, transpiled by sqlglot from Spark SQL. Nothing is generated as code from user text: DDL
is rendered from typed columns with every identifier quoted, and file paths reach DuckDB
only as parameters.

A pull query is bounded (:class:`~..language.limits.Limits`): DuckDB's memory and threads,
its time (cancelled), the size of values its functions build, and the rows and bytes of its
answer (a larger answer is refused, not cut short: add a LIMIT). A CSV or DELIMITED line
that cannot be read is skipped and counted, and the answer says so (``notes``): one bad
line written by a producer never blocks the pull queries of a topic.
"""

# long module: one pull query's private DuckDB, from loading its sources to reading back
# its bounded answer; the steps share the connection, its deadline and the query's notes.
from __future__ import annotations

import base64
import datetime
import decimal
import json
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..catalog import SourceInfo
from ..errors import ValidationError
from ..language import duckdb_calls
from ..language.analyzer import SelectAnalysis
from ..language.limits import Limits
from ..language.types import TypeName
from . import sandbox, topics
from .topics import data_files

Answer = tuple[list[str], list[list[Any]]]  # column names, rows


def run_pull_query(
    select: exp.Select,
    sources: dict[str, SourceInfo],
    analysis: SelectAnalysis,
    limits: Limits | None = None,
    notes: list[str] | None = None,
    topics: dict[str, list[dict[str, Any]]] | None = None,
) -> Answer:
    """Run ``select`` (validated by the analyzer, Spark dialect) over ``sources`` (upper-case
    name -> source) in a fresh, locked DuckDB within ``limits``: the output column names and
    plain rows. What a user should know about the answer (lines skipped) is added to ``notes``.
    ``topics``: the rows each source on a Kafka topic holds now (:mod:`.topic_tables`)."""
    with PullQuery(sources.values(), limits, topics) as query:
        answer = query.run(select, analysis)
    if notes is not None:
        notes.extend(query.notes)
    return answer


class PullQuery:
    """One pull query's private DuckDB: load the sources, lock, run one SELECT."""

    #: Spark's TIMESTAMP is an instant: text with an offset ('...+02:00') is converted to UTC
    #: (read as text, then through TIMESTAMPTZ), as Spark reads it with session time zone UTC.
    INSTANT = TypeName.TIMESTAMP
    #: How each format's files are read (file list and column types are parameters).
    READERS = {
        "JSON": "read_json(?, format='newline_delimited', auto_detect=false, columns=?)",
        # positional columns after a header line, as Spark reads them; short rows are padded
        # with NULLs and extra fields ignored (strict_mode=false), as topics.read_file does; a
        # line that cannot be read is skipped and kept in the rejects tables (SKIPPED), and a
        # quoted value across lines (which the parallel reader refuses) is read as one
        "CSV": "read_csv(?, header=true, auto_detect=false, columns=?, null_padding=true, strict_mode=false, {skip})",
        # ksqlDB's DELIMITED: no header, the source's value_delimiter (a parameter)
        "DELIMITED": "read_csv(?, header=false, auto_detect=false, columns=?, null_padding=true, strict_mode=false, "
        "delim=?, {skip})",
        "PARQUET": "read_parquet(?, union_by_name=true)",
    }
    #: What Spark writes for a timestamp in JSON: UTC with milliseconds.
    TIMESTAMP_FORMAT = {"TIMESTAMP": "%Y-%m-%dT%H:%M:%SZ", "TIMESTAMP_NTZ": "%Y-%m-%dT%H:%M:%S"}
    #: how CSV and DELIMITED readers skip what they cannot read (names: :meth:`_rejects`)
    SKIPPED = "parallel=false, ignore_errors=true, store_rejects=true, rejects_table='{0}', rejects_scan='{1}'"
    # not plain names, so never a source's or a column's name
    STAGE, ROWS, FILE = "streamql-stage", "streamql-rows", "streamql-file"
    #: rows per batch the answer is read in (its rows and bytes are counted as it comes)
    BATCH_ROWS = 8192

    def __init__(
        self,
        sources,
        limits: Limits | None = None,
        topics: dict[str, list[dict]] | None = None,
        *,
        files: dict[str, list[str]] | None = None,
    ):
        self.sources = list(sources)
        #: the rows of each source on a Kafka topic, read before (no file of theirs is read)
        self.topics = topics or {}
        self.limits = limits or Limits()
        #: each source's files as they are now (or the ones given, each a table's changes, as a
        #: push query reads them): the only files DuckDB may read
        self.changes = files is not None
        self.files = files if files is not None else {src.name: data_files(src) for src in self.sources}
        self.con = sandbox.connect(self.limits, readable=[f for files in self.files.values() for f in files])
        self.deadline = sandbox.Deadline(self.con, self.limits, "the pull query")
        #: what the answer should say (lines skipped)
        self.notes: list[str] = []

    def __enter__(self) -> PullQuery:
        self.deadline.__enter__()  # loading counts: it is part of the pull query's time
        try:
            for src in self.sources:  # under the lockdown already: only these files are read
                self._load(src)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.deadline.__exit__()
        self.con.close()

    # -- the user's SELECT ------------------------------------------------------------
    def run(self, select: exp.Select, analysis: SelectAnalysis) -> Answer:
        """Transpile ``select`` to DuckDB SQL and run it: column names and plain rows."""
        # units (a Var such as YEAR) are plain words: the parser refuses any other
        try:
            sql = sandbox.guarded(duckdb_calls.for_duckdb(select), self.limits).sql(dialect="duckdb")
        except SqlglotError as e:
            raise ValidationError(f"pull query failed: {_one_line(str(e))}") from None
        try:
            if not sandbox.one_select(self.con, sql):
                raise ValidationError(f"pull query failed: not one SELECT: {sql!r}")
            relation = self.con.sql(sql)
            types = [str(t) for t in relation.types]
            table = self._answer(relation)
        except duckdb.Error as e:
            raise self.deadline.error(e) or ValidationError(f"pull query failed: {_one_line(str(e))}") from None
        ntz = [c.type.name is TypeName.TIMESTAMP_NTZ for c in analysis.columns] + [False] * len(types)
        columns = [_plain_column(table.column(i), types[i], ntz[i]) for i in range(len(types))]
        return [c.name for c in analysis.columns], [list(row) for row in zip(*columns, strict=True)]

    def _answer(self, relation: duckdb.DuckDBPyRelation) -> pa.Table:
        """The answer, read batch by batch; more than ``pull_rows`` rows or ``pull_bytes``
        bytes is an error (a cut answer would look whole)."""
        reader = relation.to_arrow_reader(self.BATCH_ROWS)
        batches, rows, size = [], 0, 0
        for batch in reader:
            rows, size = rows + batch.num_rows, size + batch.nbytes
            if rows > self.limits.pull_rows:
                raise ValidationError(
                    self.limits.exceeded(
                        "pull_rows",
                        f"the pull query returns more than {self.limits.pull_rows:,} rows (add a LIMIT or a WHERE)",
                    )
                )
            if size > self.limits.pull_bytes:
                raise ValidationError(
                    self.limits.exceeded(
                        "pull_bytes",
                        f"the pull query's answer reaches {size:,} bytes at row {rows:,} "
                        f"(add a LIMIT or a WHERE, or select fewer columns)",
                    )
                )
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=reader.schema)

    # -- loading ----------------------------------------------------------------------
    def _load(self, src: SourceInfo) -> None:
        """``src`` as a table of its name, typed as declared (only its files are readable)."""
        name = _ident(src.name)
        files = self.files[src.name]
        if src.name in self.topics:  # as text, cast to the declared types as a file's JSON is
            self.con.register(self.ROWS, _rows_as_text(src, self.topics[src.name]))
            values = self._values(src, {c.name.lower(): c.name for c in src.columns})
            self.con.execute(f"CREATE TABLE {name} AS SELECT {values} FROM {_ident(self.ROWS)}")
            self._drop_stage()
            return
        if not files:
            columns = ", ".join(f"{_ident(c.name)} {c.type.duckdb()}" for c in src.columns)
            self.con.execute(f"CREATE TABLE {name} ({columns})")
            return
        try:
            if src.kind != "TABLE" or self.changes:
                # a table's changes are its rows in order; a row without its key is no change
                keyed = " AND ".join(f"{_ident(k)} IS NOT NULL" for k in src.key_columns if src.kind == "TABLE")
                reader, params, values = self._reader(src, files)
                select = f"SELECT {values} FROM {reader}"
                if keyed:
                    select = f"SELECT * FROM ({select}) WHERE {keyed}"
                self.con.execute(f"CREATE TABLE {name} AS {select}", params)
                self._note_skipped(src)
                return
            # latest row per key: rowid follows the file order, then the line order in a file;
            # a row without its key is no row of the table (as in ksqlDB); a key whose latest
            # row is in a tombstone file is deleted (topics.TOMBSTONES)
            reader, params, values = self._reader(src, files, with_file=True)
            keys = ", ".join(_ident(k) for k in src.key_columns)
            part = f"PARTITION BY {keys}" if keys else ""
            keyed = " AND ".join(f"{_ident(k)} IS NOT NULL" for k in src.key_columns) or "TRUE"
            rank, first = _ident(self.FILE + "-rank"), _ident(self.FILE + "-first")
            self.con.execute(f"CREATE TABLE {_ident(self.STAGE)} AS SELECT {values} FROM {reader}", params)
            self.con.execute(
                f"CREATE TABLE {name} AS SELECT {', '.join(_ident(c.name) for c in src.columns)} "
                f"FROM (SELECT *, row_number() OVER ({part} ORDER BY rowid DESC) AS {rank}, "
                f"min(rowid) OVER ({part}) AS {first} FROM {_ident(self.STAGE)} WHERE {keyed}) "
                f"WHERE {rank} = 1 AND NOT list_contains(?, {_ident(self.FILE)}) ORDER BY {first}",
                [[f for f in files if topics.is_tombstones(f)]],
            )  # keys in first-seen order, as before
            self._note_skipped(src)
        except duckdb.Error as e:
            raise self.deadline.error(e) or self._unreadable(src, files, e) from None
        finally:
            self._drop_stage()

    def _drop_stage(self) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {_ident(self.STAGE)}")
        self.con.execute(f"DROP VIEW IF EXISTS {_ident(self.ROWS)}")

    def _reader(self, src: SourceInfo, files: list[str], *, with_file: bool = False) -> tuple[str, list, str]:
        """A FROM item reading ``files``, its parameters, and the SELECT list of the declared
        columns typed as declared (``with_file``: then the path of each row's file, as
        :attr:`FILE`)."""
        extra = f", {_ident(self.FILE)}" if with_file else ""
        if src.format == "PARQUET":
            reader = self._with_file(self.READERS["PARQUET"], with_file)
            found = [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {reader}", [files]).fetchall()]
            found = [n for n in found if not (with_file and n == self.FILE)]
            by_lower = {n.lower(): n for n in reversed(found)}  # the first spelling wins
            return reader, [files], self._values(src, by_lower) + extra
        by_lower = {c.name.lower(): c.name for c in src.columns}
        may_differ = src.writer_query is None or src.mixed_spellings  # a producer's, or two spellings
        if src.format == "JSON" and may_differ and self._other_spellings(src, files):
            self.con.register(self.ROWS, self._text_rows(src, files, with_file=with_file))
            return _ident(self.ROWS), [], self._values(src, by_lower) + extra
        types = {
            c.name: "VARCHAR" if c.type.name in (self.INSTANT, TypeName.BINARY) else c.type.duckdb()
            for c in src.columns
        }
        reader = self._with_file(self.READERS[src.format].format(skip=self.SKIPPED.format(*self._rejects())), with_file)
        delimiter = [topics.value_delimiter(src.properties)] if src.format == "DELIMITED" else []
        return reader, [files, types, *delimiter], self._values(src, by_lower) + extra

    def _rejects(self) -> tuple[str, str]:
        """The tables DuckDB keeps skipped CSV lines in: plain names (as DuckDB wants them),
        none a source's."""
        taken = {src.name.lower() for src in self.sources}
        number = 0
        while f"streamql_rejects_{number}" in taken or f"streamql_reject_scans_{number}" in taken:
            number += 1
        return f"streamql_rejects_{number}", f"streamql_reject_scans_{number}"

    def _note_skipped(self, src: SourceInfo) -> None:
        """After loading a CSV or DELIMITED ``src``: a note of the lines skipped, naming the
        first (file, line, why), then the rejects tables are emptied for the next source."""
        if src.format not in ("CSV", "DELIMITED"):
            return
        errors, scans = self._rejects()
        skipped = self.con.execute(
            f"SELECT s.file_path, e.line_byte_position, e.error_message, e.csv_line FROM {errors} e JOIN {scans} s "
            f"ON e.scan_id = s.scan_id AND e.file_id = s.file_id ORDER BY s.file_path, e.line_byte_position"
        ).fetchall()
        for table in (errors, scans):
            self.con.execute(f"DROP TABLE IF EXISTS {table}")
        if skipped:
            path, position, why, text = skipped[0]
            self.notes.append(
                f"Skipped {len(skipped)} line{'s' if len(skipped) != 1 else ''} of {src.kind} {src.name} that cannot "
                f"be read, the first: line {_line_at(path, position)} of file {path!r}: {_one_line(why)}: "
                f"{str(text).strip()[:80]!r}"
            )

    def _with_file(self, reader: str, with_file: bool) -> str:
        """``reader`` (one of :attr:`READERS`) adding each row's file path as :attr:`FILE`."""
        return f"{reader[:-1]}, filename='{self.FILE}')" if with_file else reader

    def _values(self, src: SourceInfo, found: dict[str, str]) -> str:
        """The SELECT list of ``src``'s columns from what was read (``found``: lower-case
        declared name -> its name there; a column not there is NULL)."""
        values = []
        for c in src.columns:
            value = _ident(found[c.name.lower()]) if c.name.lower() in found else "NULL"
            if c.type.name is self.INSTANT:
                value = f"CAST({value} AS TIMESTAMPTZ)"
            elif c.type.name is TypeName.BINARY and src.format != "PARQUET":  # base64 text, as Spark writes it
                value = f"from_base64(CAST({value} AS VARCHAR))"
            values.append(f"CAST({value} AS {c.type.duckdb()}) AS {_ident(c.name)}")
        return ", ".join(values)

    def _other_spellings(self, src: SourceInfo, files: list[str]) -> bool:
        """Whether a JSON key names a declared column in other letter case ('ID' for ``id``):
        DuckDB matches keys exactly, a declared column matches them in any case. (A query
        writes its output under the names the catalog records, so only a producer's files and
        an output an earlier release wrote under two spellings need the look.)"""
        declared = {c.name.lower(): c.name for c in src.columns}
        keys = self.con.execute(
            "SELECT DISTINCT unnest(json_keys(json)) FROM read_ndjson_objects(?) WHERE json_type(json) = 'OBJECT'",
            [files],
        ).fetchall()
        return any(declared.get(k.lower(), k) != k for (k,) in keys)

    def _text_rows(self, src: SourceInfo, files: list[str], *, with_file: bool = False) -> pa.Table:
        """The rare slow path: records read in Python with keys matched case-insensitively
        (as :func:`topics.read_file` does), each value as text for DuckDB to cast."""
        by_lower = {c.name.lower(): c.name for c in src.columns}
        rows, paths = [], []
        for path in files:
            for record in _json_records(src, path):
                rows.append({by_lower[k.lower()]: v for k, v in record.items() if k.lower() in by_lower})
                paths.append(path)
        table = _rows_as_text(src, rows)
        return table.append_column(self.FILE, pa.array(paths, pa.string())) if with_file else table

    def _unreadable(self, src: SourceInfo, files: list[str], error: duckdb.Error) -> ValidationError:
        """Which file (and line) of ``src`` could not be read, and why: read them one by one."""
        where = f"pull query failed: cannot read {src.kind} {src.name}"
        for path in files:
            if src.format == "JSON":
                for _ in _json_records(src, path):  # raises at a line that is not a JSON object
                    pass
            try:
                self._drop_stage()
                reader, params, values = self._reader(src, [path])
                self.con.execute(f"CREATE TABLE {_ident(self.STAGE)} AS SELECT {values} FROM {reader}", params)
            except duckdb.Error as e:
                return ValidationError(f"{where}: file {path!r}: {_one_line(str(e))}")
        return ValidationError(f"{where}: {_one_line(str(error))}")


#: Arrow types of results whose Python values are JSON values already.
PLAIN_TYPES = (
    pa.types.is_boolean,
    pa.types.is_integer,
    pa.types.is_float64,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_string_view,
    pa.types.is_null,
)


def _rows_as_text(src: SourceInfo, rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` (column -> JSON value) as a table of text columns, for DuckDB to cast."""
    return pa.table({c.name: pa.array([_as_text(r.get(c.name)) for r in rows], pa.string()) for c in src.columns})


def _json_records(src: SourceInfo, path: str):
    """The JSON objects of one file; a line that is not one names the source, file and line."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                reason = f"not JSON ({e.msg})"
            else:
                if isinstance(record, dict):
                    yield record
                    continue
                reason = "not a JSON object"
            raise ValidationError(
                f"pull query failed: cannot read {src.kind} {src.name}: line {number} "
                f"of file {path!r} is {reason}: {line.strip()[:80]!r}"
            )


def _line_at(path: str, position: int) -> int:
    """The number of the line starting at byte ``position`` of file ``path`` (DuckDB counts
    records, and a quoted value may span lines)."""
    lines, left = 1, position
    with open(path, "rb") as f:
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                break
            lines, left = lines + chunk.count(b"\n"), left - len(chunk)
    return lines


def _as_text(value: Any) -> str | None:
    """A JSON value as the text DuckDB casts to the column type."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def _ident(name: str) -> str:
    """A quoted DuckDB identifier (names are plain already; quoted anyway)."""
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _one_line(message: str) -> str:
    """DuckDB's message without its SQL excerpt and advice, on one line."""
    lines = [line.strip() for line in message.split("\n\n")[0].splitlines()]
    keep = [line for line in lines if line and not line.startswith(("Possible ", "* ", "Try ", "LINE "))]
    return "; ".join(keep)


def _plain_column(column: pa.ChunkedArray, duck_type: str, ntz: bool) -> list[Any]:
    """One result column as JSON-ready Python values, as Spark would write them in JSON
    (``ntz``: a TIMESTAMP_NTZ column, written without a zone)."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        fmt = PullQuery.TIMESTAMP_FORMAT["TIMESTAMP_NTZ" if ntz else "TIMESTAMP"]
        return pc.strftime(column.cast(pa.timestamp("ms", "UTC"), safe=False), format=fmt).to_pylist()
    if pa.types.is_date(kind):
        return column.cast(pa.string()).to_pylist()
    if duck_type in ("HUGEINT", "UHUGEINT"):  # exported as DECIMAL(38, 0); SUM of integers
        return [None if v is None else int(v) for v in column.to_pylist()]
    if pa.types.is_decimal(kind):
        return column.cast(pa.float64()).to_pylist()
    if pa.types.is_float32(kind):  # the float as written (1.1, not 1.100000023841858)
        return [None if v is None else float(v) for v in column.cast(pa.string()).to_pylist()]
    if pa.types.is_map(kind):
        return [None if v is None else {k: _plain(x) for k, x in v} for v in column.to_pylist()]
    values = column.to_pylist()
    if any(test(kind) for test in PLAIN_TYPES):
        return values
    return [_plain(v) for v in values]


def _plain(value: Any) -> Any:
    """A Python value of a result as JSON would hold it."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)
