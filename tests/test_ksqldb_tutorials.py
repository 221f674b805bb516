"""Three published ksqlDB tutorials, run as published: on Kafka topics of the test broker
(each ``kafka_topic`` one of the test's own; the values in Avro, as published), and on file
topics.

On file topics, each tutorial's statements are the published ones, word for word, with only
the properties that describe its Kafka topic taken out of their WITH clauses (``kafka_topic``, and
``value_format='avro'``, which streamql reads on Kafka topics only: a file topic holds no
Avro, docs/ksqldb.md): ``partitions`` stays,
as ksqlDB users write it. The input records are the tutorial's own, inserted with
``INSERT INTO ... VALUES``; the expected rows are its published output (for a table, the
latest row of each key and window, which a ksqlDB pull query returns).

Source: Confluent's Kafka Tutorials (https://developer.confluent.io/tutorials/, Apache
License 2.0), repository confluentinc/kafka-tutorials, files
``_includes/tutorials/<name>/ksql/code/src/statements.sql`` and ``test/{input,output}.json``:
- splitting: https://developer.confluent.io/tutorials/split-a-stream-of-events-into-substreams/ksql.html
- tumbling-windows: https://developer.confluent.io/tutorials/create-tumbling-windows/ksql.html
- joining-stream-table: https://developer.confluent.io/tutorials/join-a-stream-to-a-table/ksql.html
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from .support import stream_rows, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SPLITTING = """
CREATE STREAM actingevents (name VARCHAR, title VARCHAR, genre VARCHAR)
    WITH (KAFKA_TOPIC = 'acting-events', PARTITIONS = 1, VALUE_FORMAT = 'AVRO');

CREATE STREAM actingevents_drama AS
    SELECT NAME, TITLE
      FROM ACTINGEVENTS
     WHERE GENRE='drama';

CREATE STREAM actingevents_fantasy AS
    SELECT NAME, TITLE
      FROM ACTINGEVENTS
     WHERE GENRE='fantasy';

CREATE STREAM actingevents_other AS
    SELECT NAME, TITLE, GENRE
      FROM ACTINGEVENTS
     WHERE GENRE != 'drama'
       AND GENRE != 'fantasy';
"""
ACTING_EVENTS = [
    ("Bill Murray", "Ghostbusters", "fantasy"), ("Christian Bale", "The Dark Knight", "crime"),
    ("Diane Keaton", "The Godfather: Part II", "crime"), ("Jennifer Aniston", "Office Space", "comedy"),
    ("Judy Garland", "The Wizard of Oz", "fantasy"), ("Keanu Reeves", "The Matrix", "fantasy"),
    ("Laura Dern", "Jurassic Park", "fantasy"), ("Matt Damon", "The Martian", "drama"),
    ("Meryl Streep", "The Iron Lady", "drama"), ("Russell Crowe", "Gladiator", "drama"),
    ("Will Smith", "Men in Black", "comedy"), ("Barret Oliver", "The NeverEnding Story", "fantasy"),
]

TUMBLING = """
CREATE STREAM ratings (title VARCHAR, release_year INT, rating DOUBLE, timestamp VARCHAR)
    WITH (kafka_topic='ratings',
          timestamp='timestamp',
          timestamp_format='yyyy-MM-dd HH:mm:ss',
          partitions=1,
          value_format='avro');

CREATE TABLE rating_count
    WITH (kafka_topic='rating_count') AS
    SELECT title,
           COUNT(*) AS rating_count,
           WINDOWSTART AS window_start,
           WINDOWEND AS window_end
    FROM ratings
    WINDOW TUMBLING (SIZE 6 HOURS)
    GROUP BY title;
"""
RATINGS = [
    ("Die Hard", 1998, 8.2, "2019-07-09 01:00:00"), ("Die Hard", 1998, 4.5, "2019-07-09 05:00:00"),
    ("Die Hard", 1998, 5.1, "2019-07-09 07:00:00"), ("Tree of Life", 2011, 4.9, "2019-07-09 09:00:00"),
    ("Tree of Life", 2011, 5.6, "2019-07-09 08:00:00"), ("A Walk in the Clouds", 1995, 3.6, "2019-07-09 12:00:00"),
    ("A Walk in the Clouds", 1995, 6.0, "2019-07-09 15:00:00"),
    ("A Walk in the Clouds", 1995, 4.6, "2019-07-09 22:00:00"),
    ("The Big Lebowski", 1998, 9.9, "2019-07-09 05:00:00"), ("The Big Lebowski", 1998, 4.2, "2019-07-09 02:00:00"),
    ("Super Mario Bros.", 1993, 3.5, "2019-07-09 18:00:00"),
]
# the published output's last row per (key, window): (TITLE, RATING_COUNT, WINDOW_START, WINDOW_END)
RATING_COUNTS = [
    ("Die Hard", 2, 1562630400000, 1562652000000), ("Die Hard", 1, 1562652000000, 1562673600000),
    ("Tree of Life", 2, 1562652000000, 1562673600000),
    ("A Walk in the Clouds", 2, 1562673600000, 1562695200000),
    ("A Walk in the Clouds", 1, 1562695200000, 1562716800000),
    ("The Big Lebowski", 2, 1562630400000, 1562652000000),
    ("Super Mario Bros.", 1, 1562695200000, 1562716800000),
]

JOINING = """
CREATE TABLE movies (ID INT PRIMARY KEY, title VARCHAR, release_year INT)
    WITH (kafka_topic='movies', partitions=1, value_format='avro');

CREATE STREAM ratings (MOVIE_ID INT KEY, rating DOUBLE)
    WITH (kafka_topic='ratings', partitions=1, value_format='avro');

CREATE STREAM rated_movies
    WITH (kafka_topic='rated_movies',
          value_format='avro') AS
    SELECT ratings.movie_id AS id, title, release_year, rating
    FROM ratings
    LEFT JOIN movies ON ratings.movie_id = movies.id;
"""
MOVIES = [(294, "Die Hard", 1998), (354, "Tree of Life", 2011), (782, "A Walk in the Clouds", 1995),
          (128, "The Big Lebowski", 1998), (780, "Super Mario Bros.", 1993)]
MOVIE_RATINGS = [(294, 8.2), (294, 8.5), (354, 9.9), (354, 9.7), (782, 7.8), (782, 7.7), (128, 8.7), (128, 8.4),
                 (780, 2.1)]
RATED_MOVIES = [(294, "Die Hard", 1998, 8.2), (294, "Die Hard", 1998, 8.5), (354, "Tree of Life", 2011, 9.9),
                (354, "Tree of Life", 2011, 9.7), (782, "A Walk in the Clouds", 1995, 7.8),
                (782, "A Walk in the Clouds", 1995, 7.7), (128, "The Big Lebowski", 1998, 8.7),
                (128, "The Big Lebowski", 1998, 8.4), (780, "Super Mario Bros.", 1993, 2.1)]

#: the WITH properties that describe a tutorial's Kafka topic, taken out on file topics
TOPIC_PROPERTIES = ("kafka_topic", "value_format")
_PROPERTY = r"\b{}\s*=\s*'[^']*'"


def on_files(published: str) -> str:
    """``published`` with its Kafka topic's properties taken out (and a WITH left empty)."""
    text = published
    for name in TOPIC_PROPERTIES:
        prop = _PROPERTY.format(name)
        text = re.sub(rf"(?is){prop}\s*,\s*|,\s*{prop}|{prop}", "", text)
    return re.sub(r"(?i)\bWITH\s*\(\s*\)", "", text)


def on_kafka(published: str, kafka_topics) -> str:
    """``published`` on the test broker: each ``kafka_topic`` a topic of this test's own (the
    tutorials share names such as 'ratings' with other schemas), made before the statements
    run (ksqlDB would make it from PARTITIONS); every other property as published, the
    values in Avro; from the topics' first records, as the tutorials' CLI steps set."""
    topics = re.sub(r"(?i)\b(kafka_topic\s*=\s*)'([^']*)'", lambda m: f"{m[1]}'{kafka_topics.new(m[2])}'", published)
    return "SET 'auto.offset.reset' = 'earliest';\n" + topics


@pytest.fixture(params=["files", "kafka"])
def tutorial(request, sqlite_url, home):
    """(an engine, how a tutorial's statements run there): on file topics with the Kafka
    topic's properties taken out, or as published on Kafka topics of the test broker."""
    from airflow_provider_streamql.engine import Engine

    if request.param == "files":
        yield request.getfixturevalue("sqlite_engine"), on_files
        return
    request.getfixturevalue("kafka_spark")
    kafka_topics = request.getfixturevalue("kafka_topics")
    engine = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_topics.bootstrap)
    yield engine, lambda published: on_kafka(published, kafka_topics)
    engine.close()


def settle(rows, expected) -> None:
    """Wait until ``rows()`` gives the published output (a query over a Kafka topic has no
    file to count caught up by); else show how they differ."""
    try:
        wait_until(lambda: rows() == expected, 180, "the published output")
    except AssertionError:
        assert rows() == expected


def values(rows) -> str:
    return ", ".join(f"({', '.join(map(repr, row))})" for row in rows)


def millis(value) -> int:
    """A window bound as ksqlDB shows it, milliseconds since the epoch (UTC), from the
    TIMESTAMP streamql gives it (docs/ksqldb.md section 7: ``unix_millis(WINDOWSTART)``)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return int(value.replace(tzinfo=value.tzinfo or UTC).timestamp() * 1000)


@pytest.mark.parametrize("published, taken_out", [
    ("WITH (KAFKA_TOPIC = 'a', PARTITIONS = 1, VALUE_FORMAT = 'AVRO');", "WITH (PARTITIONS = 1);"),
    ("WITH (kafka_topic='r') AS SELECT", " AS SELECT"),
    ("WITH (timestamp='ts',\n partitions=1,\n value_format='avro');", "WITH (timestamp='ts',\n partitions=1);"),
])
def test_only_the_topic_properties_are_taken_out(published, taken_out):
    assert on_files(published) == taken_out


def test_splitting_a_stream_into_substreams(tutorial, runtimes):
    engine, run = tutorial
    engine.execute(run(SPLITTING))
    runtimes.start(engine)
    engine.execute(f"INSERT INTO actingevents VALUES {values(ACTING_EVENTS)}")
    settle(lambda: {s: stream_rows(engine, s) for s in ("actingevents_drama", "actingevents_fantasy",
                                                        "actingevents_other")}, {
        "actingevents_drama": sorted((n, t) for n, t, g in ACTING_EVENTS if g == "drama"),
        "actingevents_fantasy": sorted((n, t) for n, t, g in ACTING_EVENTS if g == "fantasy"),
        "actingevents_other": sorted(e for e in ACTING_EVENTS if e[2] not in ("drama", "fantasy")),
    })


def test_a_tumbling_window_count(tutorial, runtimes):
    engine, run = tutorial
    engine.execute(run(TUMBLING))
    runtimes.start(engine)
    engine.execute(f"INSERT INTO ratings VALUES {values(RATINGS)}")

    def rows():
        result = engine.execute("SELECT title, rating_count, window_start, window_end FROM rating_count")[0]
        return sorted((t, n, millis(s), millis(e)) for t, n, s, e in result.rows)

    settle(rows, sorted(RATING_COUNTS))


def test_joining_a_stream_to_a_table(tutorial, runtimes):
    engine, run = tutorial
    engine.execute(run(JOINING))
    engine.execute(f"INSERT INTO movies VALUES {values(MOVIES)}")
    runtimes.start(engine)
    engine.execute(f"INSERT INTO ratings VALUES {values(MOVIE_RATINGS)}")
    settle(lambda: stream_rows(engine, "rated_movies"), sorted(RATED_MOVIES))
