"""Spark's source evolution, for the queries that name their streams.

A checkpoint written with named streaming sources (``DataStreamReader.name``) lets a later
version of the query add or drop a stream: Spark keys the offset log by name. It takes the
session setting :data:`SOURCE_EVOLUTION`, read when a reader is named and when a query
starts (the query keeps the value it started with, and Spark records it in the checkpoint).
With it on, Spark refuses every unnamed source, also on a checkpoint written without names;
so queries created before streamql named their streams need it off. Starts of one kind run
together; a start of the other kind waits until they are done, then the setting is switched
(measured: a query keeps the value in effect when ``start()`` returns, whatever is set after).
While a start of the other kind waits, no new start of the running kind joins, so neither
kind waits for long.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"


class SourceEvolution:
    """The setting of one session, held on or off while queries are built and started."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self._turn = threading.Condition()
        self._on: bool | None = None  # unknown until first set
        self._holders = 0
        self._waiting = {True: 0, False: 0}

    @contextmanager
    def held(self, on: bool) -> Iterator[None]:
        """Source evolution ``on`` (or off) for the block: build and start a query in it."""
        with self._turn:
            self._waiting[on] += 1
            # the running kind goes on only while the other waits for none; with nobody in,
            # the setting switches to a kind that waited for it
            while not ((self._on == on and not self._waiting[not on]) or (not self._holders and self._on != on)):
                self._turn.wait()
            self._waiting[on] -= 1
            if self._on != on:
                self.spark.conf.set(SOURCE_EVOLUTION, "true" if on else "false")
                self._on = on
            self._holders += 1
        try:
            yield
        finally:
            with self._turn:
                self._holders -= 1
                self._turn.notify_all()


_sessions: dict[int, SourceEvolution] = {}
_sessions_lock = threading.Lock()


def source_evolution(spark: SparkSession, on: bool):
    """Context manager: ``spark`` with source evolution ``on`` (a query whose plan names its
    streams) or off (one from before) while a query is built and started in it."""
    with _sessions_lock:
        held = _sessions.get(id(spark))
        if held is None or held.spark is not spark:
            held = _sessions[id(spark)] = SourceEvolution(spark)
    return held.held(on)
