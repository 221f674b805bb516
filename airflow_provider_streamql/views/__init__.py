"""The read model: what is shown of the catalog and the files on disk, apart from the
planner that changes them.

It stands between storage and the planner (DESIGN.md section 1): it reads the catalog and
storage and imports nothing above them. The planner (SHOW, DESCRIBE, EXPLAIN), the runtime's
metrics, the conditions waits wait on, the engine and, through the engine, the CLI and the
Airflow half read through it.

- :mod:`.rows`: a query's shown state and its row (SHOW QUERIES, the UI, metrics), snapshot rows
- :mod:`.describe`: the tables of SHOW, DESCRIBE and EXPLAIN; DESCRIBE ... STATE reads Spark
  state through a reader it is handed (:data:`.describe.StateReader`), never starting Spark
- :mod:`.lag`: the input files a query has not processed yet
- :mod:`.waits`: a query as a wait sees it (state, last error, hold, rollback, last batch)
- :mod:`.endings`: how a wait ends (reached, failed fast and why, timed out), decided once
- :mod:`.events`: query events (caught up, held, error, upgraded) and consumers' cursors
- :mod:`.lineage`: what a query version reads and writes, column by column
- :mod:`.reader`: :class:`~.reader.Reader`, the read side of :class:`~..engine.Engine`
"""
