"""Item 10: ksqlDB's value formats on file topics, and the ones no topic takes. AVRO and KAFKA
and PROTOBUF values are read and written on Kafka topics (tests/test_kafka_formats.py and
tests/test_kafka_protobuf.py run them on the broker); a file topic refuses them, saying so;
PROTOBUF_NOSR (PROTOBUF without value_schema_id here) and JSON_SR are refused with the reason."""

from .harness import Case

SOURCES = """
CREATE STREAM fm_orders (id INT KEY, cost DOUBLE);
"""
INPUTS = ["INSERT INTO fm_orders VALUES (1, 9.5)"]
CASES = [
    Case(10, "avro on a file topic", "CREATE STREAM fm_avro (id INT KEY, cost DOUBLE) WITH (value_format='AVRO')",
         refused="value_format 'AVRO' is read and written on Kafka topics (kafka_topic=...)"),
    Case(10, "kafka on a file topic", "CREATE STREAM fm_costs WITH (value_format='KAFKA') AS SELECT * FROM fm_orders",
         refused="value_format 'KAFKA' is read and written on Kafka topics (kafka_topic=...)"),
    Case(10, "protobuf on a file topic", "CREATE STREAM fm_proto (id INT KEY, cost DOUBLE) WITH "
         "(value_format='PROTOBUF')", refused="value_format 'PROTOBUF' is read and written on Kafka topics"),
    Case(10, "protobuf without a registry", "CREATE STREAM fm_nosr (id INT KEY, cost DOUBLE) WITH (kafka_topic='p', "
         "value_format='PROTOBUF_NOSR')", refused="value_format='PROTOBUF' without value_schema_id reads and writes the same bytes"),
    Case(10, "json schema registry", "CREATE STREAM fm_jsr (id INT KEY, cost DOUBLE) WITH (kafka_topic='p', "
         "value_format='JSON_SR')", refused="streamql reads no schema registry"),
    Case(10, "a schema id of a JSON topic", "CREATE STREAM fm_id (id INT KEY, cost DOUBLE) WITH (kafka_topic='p', "
         "value_schema_id=3)", refused="value_schema_id is for value_format='AVRO' or 'PROTOBUF', not JSON"),
    Case(10, "a KAFKA value of two columns", "CREATE STREAM fm_two (id INT KEY, cost DOUBLE, n INT) WITH "
         "(kafka_topic='p', value_format='KAFKA')",
         refused="a KAFKA value is one column of type INT, BIGINT, DOUBLE, STRING, BINARY"),
    Case(10, "a json copy stays", "CREATE STREAM fm_copy WITH (value_format='JSON') AS SELECT * FROM fm_orders",
         "fm_copy", [(1, 9.5)]),
]
