"""Stream-stream joins bounded by WITHIN, and stream-table joins read as of each batch."""
import pytest

from .support import stream_rows, wait_until

ORDERS = """
CREATE STREAM orders (oid INT, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM shipped AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier
  FROM orders o JOIN shipments s WITHIN 1 MINUTE ON o.oid = s.oid;
CREATE STREAM all_orders AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier
  FROM orders o LEFT JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 0 SECONDS ON o.oid = s.oid;
"""


def put(engine, stream, rows):
    engine.execute(";".join(f"INSERT INTO {stream} VALUES ({', '.join(map(repr, r))})" for r in rows))


def caught_up(engine, *ids):
    for query_id in ids:
        engine.wait_caught_up(query_id, timeout=60)


def test_stream_stream_inner_and_left_join(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(ORDERS)
    runtimes.start(engine)
    ids = ["CSAS_SHIPPED_1", "CSAS_ALL_ORDERS_2"]
    put(engine, "orders", [(1, 10.0, "2024-01-01 00:00:00"), (2, 20.0, "2024-01-01 00:00:10"),
                           (3, 30.0, "2024-01-01 00:00:20")])
    # order 1 ships within a minute; order 2's shipment is 5 minutes later: no match
    put(engine, "shipments", [(1, "ups", "2024-01-01 00:00:30"), (2, "dhl", "2024-01-01 00:05:00")])
    caught_up(engine, *ids)
    assert stream_rows(engine, "shipped") == [(1, 10.0, "ups")]
    # unmatched left rows wait for the watermark; nothing has passed 00:01:20 on both sides
    assert stream_rows(engine, "all_orders") == [(1, 10.0, "ups")]

    # both watermarks pass 00:10: orders 2 and 3 can no longer match and are emitted once
    put(engine, "orders", [(9, 90.0, "2024-01-01 00:10:00")])
    put(engine, "shipments", [(9, "fedex", "2024-01-01 00:10:00")])
    caught_up(engine, *ids)
    wait_until(lambda: len(stream_rows(engine, "all_orders")) == 4, what="the unmatched orders")
    assert stream_rows(engine, "all_orders") == [
        (1, 10.0, "ups"), (2, 20.0, None), (3, 30.0, None), (9, 90.0, "fedex")]
    assert stream_rows(engine, "shipped") == [(1, 10.0, "ups"), (9, 90.0, "fedex")]
    operators = engine.progress("CSAS_ALL_ORDERS_2").state_operators
    assert operators and operators[0]["operator"].startswith("symmetricHashJoin")


def test_stream_table_join_sees_rows_inserted_after_start(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE TABLE users (id STRING PRIMARY KEY, name STRING);
        CREATE STREAM clicks (user STRING, n INT);
        CREATE STREAM named_clicks AS SELECT c.user AS user, c.n AS n, u.name AS name
          FROM clicks c LEFT JOIN users u ON c.user = u.id;
        INSERT INTO users VALUES ('a', 'Ann');
    """)
    runtimes.start(engine)
    put(engine, "clicks", [("a", 1), ("b", 2)])
    caught_up(engine, "CSAS_NAMED_CLICKS_1")
    assert stream_rows(engine, "named_clicks") == [("a", 1, "Ann"), ("b", 2, None)]
    put(engine, "users", [("b", "Bob"), ("a", "Annie")])  # after the query started
    put(engine, "clicks", [("a", 3), ("b", 4)])
    caught_up(engine, "CSAS_NAMED_CLICKS_1")
    assert stream_rows(engine, "named_clicks") == [
        ("a", 1, "Ann"), ("a", 3, "Annie"), ("b", 2, None), ("b", 4, "Bob")]


@pytest.mark.parametrize("sql, fragment", [
    ("CREATE STREAM j AS SELECT o.oid AS oid FROM orders o JOIN shipments s ON o.oid = s.oid",
     "needs WITHIN"),
    ("CREATE STREAM a (oid INT); CREATE STREAM j AS SELECT a.oid AS oid FROM a JOIN shipments s "
     "WITHIN 1 MINUTE ON a.oid = s.oid", "A has no timestamp column"),
    ("CREATE TABLE t (oid INT PRIMARY KEY, x INT); CREATE STREAM j AS SELECT o.oid AS oid "
     "FROM orders o JOIN t WITHIN 1 MINUTE ON o.oid = t.oid", "WITHIN is for joins between streams"),
    # FULL and RIGHT joins between streams run (tests/ksqldb/cases_joins.py); SEMI does not
    ("CREATE STREAM j AS SELECT o.oid AS oid FROM orders o LEFT SEMI JOIN shipments s WITHIN 1 MINUTE "
     "ON o.oid = s.oid", "SEMI JOIN is not supported"),
    # SELECT * over a join names its columns O_OID, ... (tests/test_output_names.py); a name
    # given twice is still refused
    ("CREATE STREAM j AS SELECT o.oid AS o_oid, * FROM orders o JOIN shipments s WITHIN 1 MINUTE "
     "ON o.oid = s.oid", "column 'O_OID' appears twice in the output"),
])
def test_bad_joins_are_rejected(engine, sql, fragment):
    engine.execute(ORDERS.split("CREATE STREAM shipped")[0])
    with pytest.raises(Exception) as info:
        engine.execute(sql)
    assert fragment in str(info.value)
    assert engine.queries() == []


RATES = "CREATE TABLE rates (region STRING PRIMARY KEY, tier STRING PRIMARY KEY, rate DOUBLE);"
BY_RATE = "CREATE STREAM r AS SELECT c.oid AS oid, x.rate AS rate FROM charges c JOIN rates x ON "


@pytest.mark.parametrize("on, refused", [
    ("c.region = x.region AND c.tier = x.tier", None),  # a composite key: one equality per key column
    ("x.tier = c.tier AND c.region = x.region", None),
    ("UPPER(c.region) = x.region AND c.tier = x.tier", None),
    ("c.region = x.region", "stream-table joins require to join on the table's primary key"),
    ("c.region = x.region AND c.region = x.region", "joins on multiple conditions are not yet supported"),
    ("c.region = x.region AND c.tier = x.tier AND c.oid > 1", "Only equality join criteria is supported"),
    ("c.region = x.region AND c.tier = x.tier AND c.oid = 1", "each side of = reads one side of the join"),
    ("c.region = x.region AND c.tier = x.tier AND c.oid = x.rate", "joins on multiple conditions"),
    ("c.region = x.region AND x.tier = 'gold'", "each side of = reads one side of the join"),
    ("c.region || c.tier = x.region || x.tier", "stream-table joins require to join on the table's primary key"),
])
def test_a_join_condition_equates_the_tables_primary_key(engine, on, refused):
    engine.execute(RATES + "CREATE STREAM charges (oid INT, region STRING, tier STRING);")
    if refused is None:
        engine.execute(BY_RATE + on)
        assert [q["query_id"] for q in engine.queries()] == ["CSAS_R_1"]
        return
    with pytest.raises(Exception) as info:
        engine.execute(BY_RATE + on)
    assert refused in str(info.value)
    assert engine.queries() == []


def test_out_of_order_records_inside_the_grace_period_join(sqlite_engine, runtimes):
    """As in ksqlDB: a record up to GRACE PERIOD behind the streams' time still joins, with
    records that came before it and with records that come with it; one later than that does
    not (ksqlDB no longer holds its partner: a join keeps records for WITHIN + GRACE)."""
    engine = sqlite_engine
    engine.execute(ORDERS.split("CREATE STREAM shipped")[0] + """
        CREATE STREAM graced AS SELECT o.oid AS oid, s.carrier AS carrier FROM orders o
          JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 2 MINUTES ON o.oid = s.oid;""")
    runtimes.start(engine)
    put(engine, "orders", [(1, 10.0, "2024-01-01 00:00:00"), (3, 30.0, "2024-01-01 00:04:00"),
                           (5, 50.0, "2024-01-01 00:05:00")])
    put(engine, "shipments", [(5, "ups", "2024-01-01 00:05:00")])
    caught_up(engine, "CSAS_GRACED_1")
    assert stream_rows(engine, "graced") == [(5, "ups")]
    # both streams are at 00:05; these come late: 1.5 minutes (inside the grace period) ...
    put(engine, "orders", [(2, 20.0, "2024-01-01 00:03:30")])
    put(engine, "shipments", [(2, "dhl", "2024-01-01 00:03:40"), (3, "fedex", "2024-01-01 00:03:30"),
                              # ... and 4.5 minutes (beyond it)
                              (1, "post", "2024-01-01 00:00:30")])
    caught_up(engine, "CSAS_GRACED_1")
    assert stream_rows(engine, "graced") == [(2, "dhl"), (3, "fedex"), (5, "ups")]
