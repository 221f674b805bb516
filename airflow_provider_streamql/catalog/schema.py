"""Catalog tables (SQLAlchemy Core). Each table names the migration that created it."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()
NAME = String(255)

schema_version = Table(
    "streamql_schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)

# -- migration 1: the language's objects and the command log ----------------------
sources = Table(
    "sources",
    metadata,
    Column("name", NAME, primary_key=True),
    Column("kind", String(16), nullable=False),  # STREAM | TABLE
    Column("columns", Text, nullable=False),  # JSON [{name, type, key}]
    Column("properties", Text, nullable=False),  # JSON WITH (...) as given
    Column("format", String(16), nullable=False),  # JSON | CSV | PARQUET
    Column("path", Text, nullable=False),  # absolute directory
    Column("writer_query", NAME),  # query that writes it, if any
    Column("created_at", Float, nullable=False),
)

queries = Table(
    "queries",
    metadata,
    Column("id", NAME, primary_key=True),  # CSAS_X_1, CTAS_T_2, INSERTQUERY_3
    Column("seq", Integer, nullable=False, unique=True),
    Column("pipeline", NAME, nullable=False, index=True),
    Column("kind", String(16), nullable=False),  # CSAS | CTAS | INSERT
    Column("sink", NAME, nullable=False),
    Column("sources", Text, nullable=False),  # JSON [name]
    Column("sql", Text, nullable=False),  # the statement as written
    Column("select_sql", Text, nullable=False),  # the SELECT Spark runs
    # migration 7: the query's JSON ``properties`` split in three (nullable only because
    # ADD COLUMN cannot require a value of existing rows; streamql always writes them)
    Column("settings", Text),  # JSON: SET values, on_error
    Column("plan", Text),  # JSON: StreamingPlan
    Column("shape", Text),  # JSON: the validator's traits
    Column("version", Integer, nullable=False),
    Column("checkpoint", Text, nullable=False),
    Column("desired_state", String(16), nullable=False),
    Column("observed_state", String(16), nullable=False),
    Column("error", Text),
    Column("running_version", Integer),  # the version a runtime runs now
    Column("run_id", String(64)),  # migration 6: Spark's runId of that run
    # migration 14: a failing query's retries: its failures in a row, when the runtime
    # starts it again (epoch seconds; None once started, while RETRYING) and the batch it
    # runs again first (RETRYING until that batch commits)
    Column("failures", Integer),
    Column("retry_at", Float),
    Column("retry_batch", Integer),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

query_versions = Table(
    "query_versions",
    metadata,
    Column("query_id", NAME, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("sql", Text, nullable=False),
    Column("select_sql", Text, nullable=False),
    Column("settings", Text),  # migration 7, as in queries
    Column("plan", Text),
    Column("shape", Text),
    Column("sources", Text, nullable=False),  # JSON [name]
    Column("sink_columns", Text, nullable=False),  # JSON, the sink's columns then
    Column("checkpoint", Text, nullable=False),
    Column("verdict", String(32)),  # validator verdict (None for v1)
    Column("report", Text),  # JSON validator report
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("ended_at", Float),
    Column("outcome", String(32)),  # RUNNING, REPLACED, ROLLED_BACK
    Column("error", Text),
)

commands = Table(
    "commands",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("statement", Text, nullable=False),
    Column("pipeline", NAME, nullable=False),
    Column("issuer", String(512), nullable=False),
    Column("issued_at", Float, nullable=False),
)

# -- migration 2: runtimes, leases and progress -----------------------------------
runtimes = Table(
    "runtimes",
    metadata,
    Column("id", NAME, primary_key=True),
    Column("pipeline", NAME, nullable=False, index=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("stopped_at", Float),
    # migration 3: where to see it
    Column("spark_app_id", String(255)),
    Column("spark_ui_url", Text),
    Column("master", String(255)),
    # migration 13: whether it has Kafka bootstrap servers (never their values); NULL: a
    # runtime of a release that did not say
    Column("kafka", Boolean),
)

leases = Table(
    "leases",
    metadata,
    Column("query_id", NAME, primary_key=True),
    Column("runtime_id", NAME, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("expires_at", Float, nullable=False),
)

progress = Table(
    "progress",
    metadata,
    Column("query_id", NAME, primary_key=True),
    Column("batch_id", Integer, nullable=False),
    Column("input_rows", Integer, nullable=False),
    Column("total_input_rows", Integer, nullable=False),
    Column("rows_per_second", Float, nullable=False),
    Column("source_offsets", Text, nullable=False),  # JSON, as Spark reports them
    Column("last_batch_at", Float, nullable=False),
    Column("late_rows", Integer, nullable=False, default=0),  # dropped by watermark, summed
    Column("state_rows", Integer, nullable=False, default=0),
    Column("state_bytes", Integer, nullable=False, default=0),
    Column("state_operators", Text, nullable=False, default="[]"),  # JSON, per operator
    # rows violating the query's expectation: in its last batch, and summed
    Column("violations", Integer, nullable=False, default=0),
    Column("violations_total", Integer, nullable=False, default=0),
)

# -- migration 4: recent batches per query (throughput sparklines) ---------------
progress_history = Table(
    "progress_history",
    metadata,
    Column("query_id", NAME, primary_key=True),
    Column("batch_id", Integer, primary_key=True),
    Column("at", Float, nullable=False),
    Column("input_rows", Integer, nullable=False),
    Column("rows_per_second", Float, nullable=False),
)

# -- migration 5: records a query could not read (poison pills) ---------------------
bad_records = Table(
    "bad_records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("query_id", NAME, nullable=False, index=True),
    Column("record_id", String(64), nullable=False),  # sha256 of file and text, as Spark computes it
    Column("batch_id", Integer, nullable=False),
    Column("source", NAME, nullable=False),
    Column("file", Text, nullable=False),
    Column("line", Integer),
    Column("raw", Text, nullable=False),  # truncated to the runtime's limit
    Column("error", Text, nullable=False),
    Column("status", String(16), nullable=False),  # see model.BAD_RECORD_STATUSES
    Column("recorded_at", Float, nullable=False),
    Column("handled_by", String(512)),
    Column("handled_at", Float),
    UniqueConstraint("query_id", "record_id", "batch_id"),
)

# -- migration 9: copies of checkpoints a query can be restored to ------------------
checkpoint_snapshots = Table(
    "checkpoint_snapshots",
    metadata,
    Column("query_id", NAME, primary_key=True),
    Column("number", Integer, primary_key=True),  # per query, from 1
    Column("kind", String(16), nullable=False),  # see model.SNAPSHOT_KINDS
    Column("version", Integer, nullable=False),  # the query version that wrote the checkpoint
    Column("batch_id", Integer, nullable=False),  # the last committed batch it holds
    Column("position", Text, nullable=False),  # JSON: source index -> offset at that batch
    Column("folder", String(255), nullable=False),  # under the checkpoint's snapshots folder
    Column("taken_at", Float, nullable=False),
    Column("taken_by", String(512)),
    # RESTORE's own snapshot: the output of batches after this one was kept with it
    Column("output_after", Integer),
)

# -- migration 10: how far each consumer of query events has read ------------------------
event_cursors = Table(
    "event_cursors",
    metadata,
    Column("consumer", String(255), primary_key=True),  # e.g. an Airflow asset watcher's trigger
    Column("query_id", NAME, primary_key=True),
    Column("kind", String(16), primary_key=True),  # see views/events.py EVENTS
    Column("last_key", String(64), nullable=False),  # the last event delivered
    Column("updated_at", Float, nullable=False),
)

# -- migration 15: deploys (each apply of a deploy file that changed something) ----------
deploys = Table(
    "deploys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", NAME, nullable=False, index=True),
    Column("fingerprint", String(64), nullable=False),  # sha256 of the file's text
    Column("issuer", String(512), nullable=False),
    Column("applied_at", Float, nullable=False),
    Column("rolled_back_at", Float),
    Column("rolled_back_by", String(512)),
)

deploy_changes = Table(
    "deploy_changes",
    metadata,
    Column("deploy_id", Integer, primary_key=True),
    Column("query_id", NAME, primary_key=True),
    Column("action", String(16), nullable=False),  # see deploys.DeployAction
    Column("version_before", Integer),  # None: the deploy created the query
    Column("version_after", Integer, nullable=False),
    Column("snapshot", Integer),  # the checkpoint snapshot taken before (None: none to take)
)

MIGRATION_1_TABLES = (sources, queries, query_versions, commands)
MIGRATION_2_TABLES = (runtimes, leases, progress)
MIGRATION_3_COLUMNS = {runtimes: ("spark_app_id", "spark_ui_url", "master")}
MIGRATION_4_TABLES = (progress_history,)
MIGRATION_5_TABLES = (bad_records,)
MIGRATION_6_COLUMNS = {queries: ("run_id",)}
MIGRATION_7_COLUMNS = {queries: ("settings", "plan", "shape"), query_versions: ("settings", "plan", "shape")}
MIGRATION_9_TABLES = (checkpoint_snapshots,)
MIGRATION_10_TABLES = (event_cursors,)
MIGRATION_13_COLUMNS = {runtimes: ("kafka",)}
MIGRATION_14_COLUMNS = {queries: ("failures", "retry_at", "retry_batch")}
MIGRATION_15_TABLES = (deploys, deploy_changes)
MIGRATION_16_COLUMNS = {progress: ("violations", "violations_total")}
#: the columns a query's version is made of (copied back by a rollback)
DEFINITION = ("sql", "select_sql", "sources", "settings", "plan", "shape")

# -- migration 8: columns steps 1 and 2 gained after they shipped, with no step of their
# own (progress in 9b8d305, queries and query_versions in 93bb459): a catalog made before
# then lacks them. The NOT NULL ones are added with a value, then filled from the catalog.
MIGRATION_8_COLUMNS = {
    queries: ("running_version",),
    query_versions: (
        "select_sql",
        "sources",
        "sink_columns",
        "verdict",
        "report",
        "started_at",
        "ended_at",
        "outcome",
        "error",
    ),
    progress: ("late_rows", "state_rows", "state_bytes", "state_operators"),
}
