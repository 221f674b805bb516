"""The catalog itself: migrations forward, leases with epochs, heartbeats (both backends)."""
import time

from sqlalchemy import create_engine, inspect, select

from airflow_provider_streamql.catalog import LATEST, Catalog, current_version, schema
from airflow_provider_streamql.engine import Engine


def test_migrations_run_forward_on_an_existing_catalog(catalog_url, home):
    old = Catalog(catalog_url, migrate_to=1)  # a catalog as version 1 left it
    with old.engine.connect() as conn:
        assert current_version(conn) == 1
        assert not inspect(conn).has_table("leases")
    Engine(old, home=home).execute("CREATE STREAM s (id INT)")
    old.close()

    upgraded = Catalog(catalog_url)  # opening with this version migrates forward
    with upgraded.engine.connect() as conn:
        assert current_version(conn) == LATEST
        assert inspect(conn).has_table("leases")
        assert [r.name for r in conn.execute(select(schema.sources))] == ["S"]
    assert upgraded.acquire_lease("Q", "r1", 5.0) == 1


def test_lease_is_exclusive_and_fenced_by_epoch(catalog_url):
    catalog = Catalog(catalog_url)
    assert catalog.acquire_lease("Q", "r1", 0.5) == 1
    assert catalog.acquire_lease("Q", "r2", 0.5) is None  # live lease held by r1
    assert catalog.acquire_lease("Q", "r1", 0.5) == 1  # renewal keeps the epoch
    time.sleep(0.6)
    assert catalog.acquire_lease("Q", "r2", 5.0) == 2  # expired: taken with a new epoch
    assert catalog.renew_lease("Q", "r1", 1, 5.0) is False  # r1 learns it lost the lease
    assert catalog.set_observed("Q", "RUNNING", runtime_id="r1", epoch=1) is False
    catalog.release_lease("Q", "r2")
    assert catalog.acquire_lease("Q", "r1", 5.0) == 1


def test_heartbeats_and_runtime_stop(catalog_url):
    catalog = Catalog(catalog_url)
    catalog.heartbeat("rt-1", "p", "host", 42)
    first = catalog.runtimes()[0]["heartbeat_at"]
    time.sleep(0.01)
    catalog.heartbeat("rt-1", "p", "host", 42)
    catalog.acquire_lease("Q", "rt-1", 30)
    assert catalog.runtimes()[0]["heartbeat_at"] > first
    catalog.runtime_stopped("rt-1")
    assert catalog.runtimes()[0]["stopped_at"] is not None
    assert catalog.leases() == {}


def test_newer_catalog_than_code_is_refused(sqlite_url):
    import pytest
    from sqlalchemy import update

    from airflow_provider_streamql.errors import CatalogError
    Catalog(sqlite_url)
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(update(schema.schema_version).values(version=LATEST + 1))
    with pytest.raises(CatalogError, match="newer than this streamql"):
        Catalog(sqlite_url)


def test_progress_history_keeps_the_last_batches(catalog_url):
    from airflow_provider_streamql.catalog import Progress
    from airflow_provider_streamql.catalog.store import HISTORY
    catalog = Catalog(catalog_url)
    batch = lambda n: Progress("Q", n, 10, 10, float(n), [], 1000.0 + n)
    for n in range(HISTORY + 11):
        catalog.record_progress(batch(n))
    history = catalog.progress_history("Q")
    assert [h["batch_id"] for h in history] == list(range(11, HISTORY + 11))
    assert history[-1] == {"batch_id": HISTORY + 10, "at": 1000.0 + HISTORY + 10, "input_rows": 10,
                           "rows_per_second": float(HISTORY + 10)}
    assert catalog.progress("Q").total_input_rows == 10 * (HISTORY + 11)
    catalog.record_progress(batch(40))  # a rolled-back checkpoint runs batch 40 again
    assert [h["batch_id"] for h in catalog.progress_history("Q")] == list(range(11, 41))
