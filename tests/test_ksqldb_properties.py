"""ksqlDB's WITH properties and SET settings as users paste them (issue 31): each has a
meaning here or is refused with the reason, never as "unknown property"; the error points at
the property, and what a recorded property does is shown by DESCRIBE ... EXTENDED."""
import pytest

from airflow_provider_streamql.errors import ValidationError

from .test_errors import catalog_dump

# (the WITH clause of `CREATE STREAM s (id INT KEY, v STRING)`, the error or None, its column)
PROPERTIES = [
    ("WITH (partitions=4, replicas=3)", None, None),
    ("WITH (kafka_topic='s', partitions=1, value_format='JSON', key_format='JSON')", None, None),
    ("WITH (key_format='KAFKA', value_format='JSON')", None, None),  # a file topic: recorded
    ("WITH (format='JSON')", None, None),
    ("WITH (wrap_single_value=true, retention_ms=604800000)", None, None),
    ("WITH (partitions=0)", "property partitions = 0: must be a whole number above 0", 46),
    ("WITH (replicas='three')", "property replicas = 'three': must be a whole number above 0", 46),
    ("WITH (kafka_topic='s', value_format='AVRO', value_schema_id=3, value_avro_schema_full_name='a.B')", None, None),
    ("WITH (kafka_topic='s', value_format='KAFKA')", None, None),
    ("WITH (value_format='AVRO')", "value_format 'AVRO' is read and written on Kafka topics", 46),
    ("WITH (value_format='PROTOBUF_NOSR')", "PROTOBUF_NOSR is not a format of its own here", 46),
    ("WITH (value_format='KAFKA')", "value_format 'KAFKA' is read and written on Kafka topics", 46),
    ("WITH (wrap_single_value=false)", "an unwrapped single value is not read or written", 46),
    ("WITH (value_schema_id=3)", "value_schema_id is for value_format='AVRO' or 'PROTOBUF', not JSON", 46),
    ("WITH (value_schema_full_name='a.B')", "property 'value_schema_full_name' is refused: streamql reads no schema "
     "registry", 46),
    ("WITH (window_type='TUMBLING')", "a windowed key is not read from a topic", 46),
    ("WITH (key_format='XML')", "must be one of ksqlDB's key formats", 46),
    ("WITH (kafka_topic='s', key_format='KAFKA')",
     "on a Kafka topic streamql writes its one key column id as a JSON value \\(KEY_FORMAT='JSON'\\)", 63),
    ("WITH (format='JSON', value_format='JSON')", "give FORMAT or KEY_FORMAT and VALUE_FORMAT, not both", 46),
    ("WITH (partitions=1, colour='red')", "unknown property 'colour'", 60),
    ("WITH (format='JSON', value_delimiter='|')", "value_delimiter is for value_format='DELIMITED', not JSON", 61),
]

# (the WITH clause of `CREATE STREAM q ... AS SELECT * FROM s`, the error, its column): a
# query's own properties are placed at the property too
QUERY_PROPERTIES = [
    ("WITH (on_error='NOPE')", "on_error must be one of FAIL, LOG_AND_CONTINUE, PAUSE, not 'NOPE'", 23),
    ("WITH (partitions=1, on_error=3)", "on_error must be one of", 37),
    ("WITH (dead_letter_topic='x y')", "property dead_letter_topic = 'x y': must be a Kafka topic name", 23),
    ("WITH (partitions=1, start='../../etc')", "property start = '../../etc': must be 'earliest', 'latest' or a time", 37),
    # expectations (language/expectations.py): refused at the property, the value named
    ("WITH (expect='v')", "property expect = 'v': must be a boolean expression, not STRING", 23),
    ("WITH (partitions=1, expect='cost > 0')", r"property expect = 'cost > 0': unknown column 'cost' \(known: id, v\)",
     37),
    ("WITH (expect='id > ''a''')", "property expect = \"id > 'a'\": type error: cannot compare", 23),
    ("WITH (expect='1=1; DROP STREAM s')", "property expect = '1=1; DROP STREAM s': must be one boolean expression, "
     "not a statement", 23),
    ("WITH (expect='count(*) > 1')", "is checked row by row: an aggregate is not allowed", 23),
    ("WITH (expect='id > 0''); DROP STREAM s; --')", "is not an expression: Error tokenizing", 23),  # unclosed quote
    ("WITH (expect='" + "(" * 5000 + "id > 0" + ")" * 5000 + "')", "is nested too deeply to be read", 23),
    ("WITH (expect='id > 0', on_violation='IGNORE')", "property on_violation = 'IGNORE': must be one of LOG, DROP, "
     "FAIL, PAUSE", 40),
    ("WITH (on_violation='DROP')", "property on_violation = 'DROP': says what a row violating the expectation does; "
     "give the expectation too", 23),
]


@pytest.mark.parametrize("clause, error, col", PROPERTIES)
def test_a_ksqldb_property_has_a_meaning_or_a_reason(engine, home, clause, error, col):
    sql = f"CREATE STREAM s (id INT KEY, v STRING) {clause}"
    if error is None:
        engine.execute(sql)
        return
    before = catalog_dump(engine.catalog.url)
    with pytest.raises(ValidationError, match=error) as info:
        engine.execute(sql)
    assert (info.value.line, info.value.col) == (1, col)  # at the property, not at CREATE
    assert catalog_dump(engine.catalog.url) == before


@pytest.mark.parametrize("clause, error, col", QUERY_PROPERTIES)
def test_a_query_property_error_points_at_the_property(engine, clause, error, col):
    engine.execute("CREATE STREAM s (id INT KEY, v STRING) WITH (kafka_topic='s')")
    before = catalog_dump(engine.catalog.url)
    with pytest.raises(ValidationError, match=error) as info:
        engine.execute(f"CREATE STREAM q {clause} AS SELECT * FROM s")
    assert (info.value.line, info.value.col) == (1, col)
    assert catalog_dump(engine.catalog.url) == before


def test_describe_extended_says_what_a_recorded_property_does(engine):
    engine.execute("CREATE STREAM s (id INT KEY, v STRING) WITH (partitions=4, key_format='KAFKA')")
    said = engine.execute("DESCRIBE s EXTENDED")[0].message.splitlines()
    assert "Property partitions = 4 (recorded: a file topic has no partitions; a Kafka topic is made " \
           "outside streamql)" in said
    assert any(line.startswith("Property key_format = 'KAFKA'") for line in said)


# (the SET statement, what it says, the session property it sets or None)
SETTINGS = [
    ("SET 'ksql.streams.auto.offset.reset' = 'earliest'", "Set auto.offset.reset = earliest", "earliest"),
    ("SET 'ksql.streams.cache.max.bytes.buffering' = '0'",
     "ksql.streams.cache.max.bytes.buffering has no effect in streamql: a table's changes are written once "
     "per micro-batch", None),
    ("SET 'processing.guarantee' = 'exactly_once_v2'", "Set processing.guarantee = exactly_once_v2", None),
    ("SET 'ksql.streams.processing.guarantee' = 'AT_LEAST_ONCE'", "Set processing.guarantee = at_least_once", None),
    ("SET 'ksql.query.pull.table.scan.enabled' = 'true'", "a ksqlDB server setting, which no streamql", None),
    ("SET 'ksql.fail.on.deserialization.error' = 'false'", "Set on_error = LOG_AND_CONTINUE", None),
]


@pytest.mark.parametrize("sql, said, offset_reset", SETTINGS)
def test_a_ksqldb_setting_is_mapped_or_accepted_with_what_it_does(engine, sql, said, offset_reset):
    [result, shown] = engine.execute(f"{sql}; SHOW PROPERTIES")
    assert said in result.message
    assert dict((k, v) for k, v, _ in shown.rows)["auto.offset.reset"] == offset_reset


# (a processing.guarantee the SET gives, what the refusal says)
GUARANTEES_REFUSED = [
    ("exactly_once", "processing.guarantee = 'exactly_once' is refused: exactly_once \\(v1\\) was removed in Kafka 4.0"),
    ("exactly_once_beta", "exactly_once_beta was renamed exactly_once_v2"),
    ("at_most_once", "processing.guarantee must be one of at_least_once, exactly_once_v2, not 'at_most_once'"),
    ("exactly_once_v2'; DROP STREAM s; --", "must be one of at_least_once, exactly_once_v2, not \"exactly_once_v2'; DROP"),
]


@pytest.mark.parametrize("value, said", GUARANTEES_REFUSED)
def test_a_processing_guarantee_streamql_has_not_is_refused_naming_it(engine, value, said):
    engine.execute("CREATE STREAM s (id INT KEY, v STRING)")
    before = catalog_dump(engine.catalog.url)
    quoted = value.replace("'", "''")
    with pytest.raises(ValidationError, match=said):
        engine.execute(f"SET 'processing.guarantee' = '{quoted}'; CREATE STREAM t AS SELECT * FROM s")
    assert catalog_dump(engine.catalog.url) == before


# (the script's SETs, the processing.guarantee its query records: None is ksqlDB's default, at least once)
GUARANTEES_RECORDED = [
    ("", None),
    ("SET 'processing.guarantee' = 'exactly_once_v2';", "exactly_once_v2"),
    ("SET 'ksql.streams.processing.guarantee' = 'exactly_once_v2';", "exactly_once_v2"),
    ("SET 'processing.guarantee' = 'exactly_once_v2'; SET 'processing.guarantee' = 'at_least_once';", "at_least_once"),
    ("SET 'processing.guarantee' = 'exactly_once_v2'; UNSET 'processing.guarantee';", None),
]


@pytest.mark.parametrize("sets, recorded", GUARANTEES_RECORDED)
def test_the_processing_guarantee_is_recorded_with_the_query(engine, sets, recorded):
    engine.execute(f"CREATE STREAM s (id INT KEY, v STRING); {sets} CREATE STREAM t AS SELECT * FROM s;"
                   f"{sets} CREATE STREAM k WITH (kafka_topic='k') AS SELECT * FROM s")
    assert engine.query("CSAS_T_1").settings.get("processing.guarantee") == recorded
    explained = dict(engine.execute("EXPLAIN CSAS_K_2")[0].rows)
    assert explained["processing_guarantee"] == (recorded or "at_least_once")
    assert "processing_guarantee" not in dict(engine.execute("EXPLAIN CSAS_T_1")[0].rows)  # a file output


def test_a_setting_that_is_not_ksqldbs_is_still_unknown(engine):
    with pytest.raises(ValidationError, match="unknown property 'colour'"):
        engine.execute("SET 'colour' = 'red'")


# (the script's SETs, the on_error its query records, or the refusal: None follows the
# pipeline's default, LOG_AND_CONTINUE unless its runtime says otherwise)
POLICIES_RECORDED = [
    ("", None),
    ("SET 'ksql.fail.on.deserialization.error' = 'true';", "FAIL"),
    ("SET 'ksql.fail.on.deserialization.error' = 'FALSE';", "LOG_AND_CONTINUE"),
    ("SET 'on_error' = 'pause';", "PAUSE"),
    ("SET 'ksql.fail.on.deserialization.error' = 'true'; UNSET 'ksql.fail.on.deserialization.error';", None),
    ("SET 'ksql.fail.on.deserialization.error' = 'yes';",
     ValidationError("ksql.fail.on.deserialization.error must be one of true, false, not 'yes'")),
    ("SET 'on_error' = 'ignore';", ValidationError("on_error 'ignore' is not one of FAIL, LOG_AND_CONTINUE, PAUSE")),
]


@pytest.mark.parametrize("sets, recorded", POLICIES_RECORDED)
def test_ksqldbs_fail_on_deserialization_error_sets_the_error_policy(engine, sets, recorded):
    script = (f"CREATE STREAM s (id INT KEY, v STRING); {sets} CREATE STREAM t AS SELECT * FROM s;"
              f"CREATE STREAM w WITH (on_error='PAUSE') AS SELECT * FROM s")
    if isinstance(recorded, Exception):
        with pytest.raises(type(recorded), match=str(recorded)):
            engine.execute(script)
        assert engine.catalog.queries() == []
        return
    engine.execute(script)
    assert engine.query("CSAS_T_1").settings.get("on_error") == recorded
    assert engine.query("CSAS_W_2").settings["on_error"] == "PAUSE"  # a query's own WITH comes first
