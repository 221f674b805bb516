"""What a persistent query reads and writes, column by column, as plain data read from the
catalog: the lineage an OpenLineage emitter (``operators/lineage.py``) or any other
metadata system turns into its own events.

Dataset names follow the OpenLineage naming spec: a file topic is namespace ``file`` and its
absolute directory; a Kafka topic is ``kafka://<host:port>`` (the first bootstrap server) and
the topic. Column lineage comes from sqlglot's lineage over the SELECT the query runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.lineage import lineage as column_lineage
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import build_scope

from ..catalog import Catalog, SourceInfo
from ..errors import NotFoundError
from ..language.streaming import StreamingPlan

#: how an output column is made from an input column (OpenLineage's DIRECT subtypes)
IDENTITY, TRANSFORMATION, AGGREGATION = "IDENTITY", "TRANSFORMATION", "AGGREGATION"


@dataclass(frozen=True)
class Dataset:
    """A topic as a lineage dataset: where it lives and its columns (name, SQL type)."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class InputColumn:
    """One input column an output column is computed from, and how."""

    namespace: str
    name: str
    column: str
    transformation: str


@dataclass(frozen=True)
class QueryLineage:
    """One version of a persistent query: its inputs, its output, each output column's
    input columns, the statement as written and the validator's verdict (None for v1)."""

    query_id: str
    version: int
    pipeline: str
    sink: str
    sql: str
    verdict: str | None
    inputs: tuple[Dataset, ...]
    output: Dataset
    columns: dict[str, tuple[InputColumn, ...]] = field(default_factory=dict)


def dataset_of(source: SourceInfo, kafka_bootstrap: str | None = None) -> Dataset:
    """The lineage dataset of a stream or table. A Kafka topic's namespace needs the
    bootstrap servers, which live in runtime configuration, not in the catalog: without
    them it is ``kafka``."""
    fields = tuple((c.name, c.type.spark()) for c in source.columns)
    if source.kafka_topic:
        server = (kafka_bootstrap or "").split(",")[0].strip()
        return Dataset(f"kafka://{server}" if server else "kafka", source.kafka_topic, fields)
    return Dataset("file", source.path, fields)


def query_lineage(
    catalog: Catalog, query_id: str, *, version: int | None = None, kafka_bootstrap: str | None = None
) -> QueryLineage:
    """The lineage of ``version`` of ``query_id`` (default its current version): the
    statement, inputs and output columns the catalog recorded for that version, each input
    with its columns as they are now."""
    query = catalog.query(query_id.upper())
    if query is None:
        raise NotFoundError(f"no query {query_id!r}")
    version = version or query.version
    row = next((v for v in catalog.versions(query.id) if v["version"] == version), None)
    if row is None:
        raise NotFoundError(f"query {query.id} has no version {version!r}")
    plan = StreamingPlan.from_dict(json.loads(row["plan"])) if row["plan"] else query.plan
    sources = catalog.sources()
    inputs = {n: dataset_of(sources[n], kafka_bootstrap) for n in json.loads(row["sources"]) if n in sources}
    sink = dataset_of(sources[query.sink], kafka_bootstrap) if query.sink in sources else Dataset("file", query.sink)
    output = Dataset(sink.namespace, sink.name, tuple((c["name"], c["type"]) for c in json.loads(row["sink_columns"])))
    return QueryLineage(
        query_id=query.id,
        version=version,
        pipeline=query.pipeline,
        sink=query.sink,
        sql=row["sql"],
        verdict=row["verdict"],
        inputs=tuple(inputs.values()),
        output=output,
        columns=_columns(plan.spark_sql or row["select_sql"], plan.views, sources, inputs, output),
    )


def _columns(
    sql: str, views: dict[str, str], sources: dict[str, SourceInfo], inputs: dict[str, Dataset], output: Dataset
) -> dict[str, tuple[InputColumn, ...]]:
    """Each output column's input columns, traced through the SELECT Spark runs (its FROM
    names the query's temporary views, mapped back to streams here)."""
    stream_of = {view.lower(): name for name, view in views.items()}
    schema: dict[str, object] = {
        v: {c.name: c.type.to_sqlglot() for c in sources[n].columns} for v, n in stream_of.items() if n in sources
    }
    columns: dict[str, tuple[InputColumn, ...]] = {}
    try:  # qualified once for every column, as sqlglot's lineage qualifies a query given as text
        tree = qualify(
            sqlglot.parse_one(sql, dialect="spark"),
            schema=schema,
            dialect="spark",
            validate_qualify_columns=False,
            identify=False,
        )
        scope = build_scope(tree)
    except Exception:  # nothing sqlglot can trace: no column lineage
        return columns
    for out, _type in output.fields:
        try:
            node = column_lineage(out, tree, schema=schema, dialect="spark", scope=scope, copy=False)
            found = _inputs_of(node, stream_of, inputs)
        except Exception:  # a column the SELECT does not name (a table's key): no lineage for it
            continue
        columns[out] = tuple(sorted(set(found), key=lambda c: (c.name, c.column)))
    return columns


def _inputs_of(node, stream_of: dict[str, str], inputs: dict[str, Dataset]) -> list[InputColumn]:
    """The input columns at the leaves of one output column's lineage tree."""
    how = _transformation(node.expression)
    found = []
    for leaf in node.walk():
        if leaf.downstream or not isinstance(leaf.expression, exp.Table):
            continue
        stream = stream_of.get(leaf.expression.name.lower())
        if stream in inputs:
            # sqlglot names it as written in the SELECT (quoted, case folded): the stream's
            # own spelling is the dataset's field
            name = exp.maybe_parse(leaf.name, into=exp.Column).name
            column = next((f for f, _type in inputs[stream].fields if f.lower() == name.lower()), name)
            found.append(InputColumn(inputs[stream].namespace, inputs[stream].name, column, how))
    return found


def _transformation(expression: exp.Expr) -> str:
    """IDENTITY for a column passed through, AGGREGATION for an aggregate, else
    TRANSFORMATION."""
    inner = expression.this if isinstance(expression, exp.Alias) else expression
    if isinstance(inner, exp.Column):
        return IDENTITY
    if inner.find(exp.AggFunc):
        return AGGREGATION
    return TRANSFORMATION
