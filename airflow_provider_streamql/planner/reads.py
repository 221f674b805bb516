"""Statements that read or append records, or describe the catalog, without a persistent
query: ``INSERT INTO s VALUES (...)``, pull queries (``SELECT ... FROM x``, run on DuckDB by
:mod:`..storage.pull`), and ``SHOW``, ``DESCRIBE`` and ``EXPLAIN`` (tables built by
the read model, :mod:`..views.describe`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlglot import exp

from ..errors import NotFoundError, StateError, ValidationError
from ..language import statements as st
from ..results import Result
from ..storage import kafka_records, kafka_topics, printing, topics
from ..storage.kafka_values import KafkaValue
from ..storage.topic_tables import topic_rows
from . import properties
from .planning import Planning, error_at, state_error_at
from .step import Step, remove_files


class Reads:
    """INSERT VALUES, pull queries, SHOW, DESCRIBE and EXPLAIN, planned in ``planning``."""

    def __init__(self, planning: Planning):
        self.planning = planning

    def insert_values(self, stmt: st.InsertValues) -> Step:
        src = self.planning.source_read(stmt.target, stmt, "INSERT INTO")
        if src.writer_query:
            raise error_at(
                f"{src.name} is written by query {src.writer_query}; INSERT VALUES "
                f"appends only to declared streams and tables",
                stmt,
            )
        by_lower = {c.name.lower(): c for c in src.columns}
        names = stmt.columns or [c.name for c in src.columns]
        if len(names) != len(stmt.rows[0]):
            raise error_at(f"{src.name} has {len(names)} columns but {len(stmt.rows[0])} values were given", stmt)
        unknown = next((name for name in names if name.lower() not in by_lower), None)
        if unknown is not None:
            raise error_at(
                f"{src.name} has no column {unknown!r} (columns: {', '.join(by_lower[k].name for k in by_lower)})",
                stmt,
            )
        # every value of every row is evaluated and checked against its column before anything
        # is written; columns left out of the column list are NULL (as in ksqlDB)
        # DuckDB evaluates the values: loaded by the statements that need it, not by every command
        from ..storage.values import ValueEvaluator, record_problem, stored

        records = []
        with ValueEvaluator(self.planning.limits) as evaluator:
            for n, row in enumerate(stmt.rows, start=1):
                where = f"row {n}: " if len(stmt.rows) > 1 else ""
                record: dict[str, Any] = {c.name: None for c in src.columns}
                for name, tree in zip(names, row, strict=True):
                    column = by_lower[name.lower()]
                    try:
                        # Spark's reader applies the source's timestampFormat to its TIMESTAMP columns
                        record[column.name] = stored(
                            evaluator.value(tree, column.name),
                            column,
                            tree,
                            timestamp_format=None if src.kafka_topic else src.properties.get("timestamp_format"),
                        )
                    except ValidationError as e:
                        raise error_at(where + e.message, stmt) from None
                    if column.name == src.timestamp_column and (
                        problem := _text_time_problem(src, record[column.name])
                    ):
                        raise error_at(where + problem, stmt)
                problem = record_problem(record, src.format, self.planning.limits)
                if problem:
                    raise error_at(where + problem, stmt)
                for key in src.key_columns if src.kind == "TABLE" else []:
                    if record[key] is None:
                        raise error_at(f"{where}primary key column {key!r} of {src.name} cannot be NULL", stmt)
                records.append(record)

        count = f"{len(records)} record" + ("s" if len(records) > 1 else "")
        if src.kafka_topic:
            return self._produce(stmt, src, records, count)

        def files() -> Callable[[], None]:
            written = topics.append(
                src.path, src.format, src.columns, records, delimiter=topics.value_delimiter(src.properties)
            )
            return lambda: remove_files([written])

        return Step(Result(stmt.text, f"Inserted {count} into {src.name}"), files=files)

    def pull_query(self, stmt: st.PullQuery) -> Step:
        analysis = self.planning.analyze_pull(stmt)
        sources = {name: self.planning.snapshot.sources[name] for name in analysis.sources}
        on_kafka = [s for s in sources.values() if s.kafka_topic]
        for src in on_kafka:
            self.planning.kafka_settings(f"a pull query of {src.name} (Kafka topic {src.kafka_topic!r})", stmt)

        result = Result(stmt.text)

        def read() -> None:
            # after the script's writes are committed, outside any catalog transaction: a
            # pull query never holds the catalog's write lock
            from ..storage.pull import run_pull_query

            notes: list[str] = []
            read_topics = {
                src.name: topic_rows(self.planning.kafka, src, self.planning.limits, notes) for src in on_kafka
            }
            select = analysis.named or cast(exp.Select, stmt.select)  # one SELECT (parse_select)
            result.columns, result.rows = run_pull_query(
                select, sources, analysis, self.planning.limits, notes, topics=read_topics
            )
            if notes:
                result.message = "; ".join(notes)
                result.details["notes"] = notes

        return Step(result, read=read, reads=frozenset(sources))

    def print_topic(self, stmt: st.PrintTopic) -> Step:
        src = self.planning.source_read(stmt.name, stmt, "PRINT")
        result = Result(stmt.text, f"Format: {src.format}", columns=printing.columns(src))
        kafka, limits = self.planning.kafka, self.planning.limits

        def read() -> None:
            # outside any catalog transaction, as a pull query: the topic as it is now
            start = printing.Printed() if stmt.from_beginning else printing.skip_all(src, kafka)
            printed = printing.print_records(
                src, start, interval=stmt.interval, limit=stmt.limit, kafka=kafka, limits=limits
            )
            result.rows = printed.rows
            result.details["print"] = {
                "source": src.name,
                "interval": stmt.interval,
                "limit": stmt.limit,
                **printed.to_dict(),
            }

        return Step(result, read=read, reads=frozenset({src.name}))

    def _produce(self, stmt: st.InsertValues, src, records: list[dict[str, Any]], count: str) -> Step:
        """INSERT VALUES on a Kafka topic: the records produced, in order, once every check
        passed (inside the catalog transaction, as a file topic's append: a failed delivery
        fails the statement and the script). Kafka has no undo: what a broker took stays."""
        kafka = self.planning.kafka
        topic = cast(str, src.kafka_topic)

        def files() -> None:
            try:
                made = [kafka_records.encode(r, src.columns, KafkaValue.of(src)) for r in records]
                kafka_topics.produce(kafka, topic, made)
            except StateError as e:
                raise state_error_at(f"INSERT INTO {src.name}: {e.message}", stmt) from None

        return Step(Result(stmt.text, f"Inserted {count} into {src.name} (Kafka topic {topic!r})"), files=files)

    def show(self, stmt: st.Show) -> Step:
        from ..views.describe import show
        from .control import SESSION_PROPERTIES

        return Step(
            show(
                self.planning.catalog,
                self.planning.conn,
                self.planning.snapshot,
                stmt,
                self.planning.settings,
                SESSION_PROPERTIES,
            )
        )

    def describe(self, stmt: st.Describe) -> Step:
        from ..views.describe import describe, describe_query, describe_state, described
        from ..views.descriptions import with_consumer_offsets

        if stmt.state:
            if stmt.name not in self.planning.snapshot.queries:
                raise NotFoundError(
                    f"no query {stmt.name!r}: DESCRIBE ... STATE takes a query ID",
                    line=stmt.line,
                    col=stmt.col,
                    text=stmt.text,
                )
            query = self.planning.snapshot.queries[stmt.name]
            result, read_rows = describe_state(query, stmt, self.planning.read_state)
            return Step(result, read=read_rows, reads=frozenset({query.id, query.sink}))
        if stmt.name not in self.planning.snapshot.sources and stmt.name in self.planning.snapshot.queries:
            return Step(describe_query(self.planning.catalog, self.planning.conn, self.planning.snapshot, stmt))
        if stmt.name not in self.planning.snapshot.sources:
            raise self.planning.unknown(stmt.name, stmt)
        src = self.planning.snapshot.sources[stmt.name]
        notes = properties.recorded(src.properties)
        result = describe(self.planning.catalog, self.planning.conn, self.planning.snapshot, stmt, notes)
        if not (stmt.extended and src.kafka_topic):
            return Step(result)
        snapshot, kafka = self.planning.snapshot, self.planning.kafka

        def read() -> None:
            # the topic's offsets from the broker after the catalog transaction, as a pull
            # query reads: DESCRIBE never holds the catalog's write lock while Kafka answers
            described(result, with_consumer_offsets(result.description, snapshot, kafka))

        return Step(result, read=read, reads=frozenset({src.name}))

    def explain(self, stmt: st.Explain) -> Step:
        from ..views.describe import explain

        if stmt.query_id not in self.planning.snapshot.queries:
            raise NotFoundError(f"no query {stmt.query_id!r}", line=stmt.line, col=stmt.col, text=stmt.text)
        return Step(explain(self.planning.catalog, self.planning.conn, self.planning.snapshot, stmt))


def _text_time_problem(src, value: Any) -> str | None:
    """Why ``value`` of ``src``'s event-time column, declared as text, is not one its
    ``timestamp_format`` reads (a runtime would hold it as a bad record); None when it is, or
    when the pattern uses letters this check does not know (Spark judges it then)."""
    if src.text_time is None or value is None:
        return None
    try:
        if topics.spark_pattern(src.text_time).matches(value):
            return None
    except ValidationError:
        return None
    return (
        f"value {value!r} of column {src.timestamp_column!r} is {src.name}'s event time, and its "
        f"timestamp_format {src.text_time!r} does not read it"
    )
