"""The ``streamql`` asset URI scheme: ``streamql://<connection id>/<STREAM OR TABLE>``, the
Asset of a stream or table in the catalog a ``streamql`` connection names. Registered under
``asset-uris`` in the provider info: Airflow normalises and checks such URIs with
:func:`sanitize_uri` and converts them to OpenLineage datasets with
:func:`convert_asset_to_openlineage`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from airflow.sdk import Asset

from ..errors import StreamQLError
from ..language import check_object_name, parse
from ..language.statements import CreateAsSelect, InsertSelect

if TYPE_CHECKING:
    from airflow.sdk import AssetWatcher

SCHEME = "streamql"
#: what an Airflow connection id may be, as the URI's host
CONN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}")
#: StreamQLHook.default_conn_name (not imported: the hook imports the engine)
DEFAULT_CONN_ID = "streamql_default"


def stream_asset(
    name: str,
    *,
    streamql_conn_id: str = DEFAULT_CONN_ID,
    watchers: list[AssetWatcher] | None = None,
    extra: dict[str, Any] | None = None,
) -> Asset:
    """The Asset of stream or table ``name`` (e.g. a query's sink): a DAG scheduled on it
    runs when a task with it as an outlet succeeds, or when one of its ``watchers`` fires."""
    if not isinstance(streamql_conn_id, str) or not CONN_ID.fullmatch(streamql_conn_id):
        raise ValueError(f"streamql_conn_id {streamql_conn_id!r} is not a connection id (letters, digits, _-.)")
    uri = f"{SCHEME}://{streamql_conn_id}/{check_object_name(name, 'stream or table')}"
    return Asset(name=uri, uri=uri, watchers=watchers or [], extra=extra or {})


def sink_assets(sql: object, streamql_conn_id: str) -> list[Asset]:
    """The Assets of the streams and tables ``sql`` writes (``CREATE ... AS SELECT``,
    ``INSERT INTO``): an operator's default outlets. Only for SQL text known when the DAG is
    parsed: none for a template or a ``.sql`` file (give ``outlets=`` then), nor for text
    that does not parse (the task reports that when it runs)."""
    if not isinstance(sql, str) or "{{" in sql or "{%" in sql or sql.strip().lower().endswith(".sql"):
        return []
    try:
        statements = parse(sql)
    except StreamQLError:
        return []
    names = [s.name for s in statements if isinstance(s, CreateAsSelect)]
    names += [s.target for s in statements if isinstance(s, InsertSelect)]
    return [stream_asset(n, streamql_conn_id=streamql_conn_id) for n in dict.fromkeys(n.upper() for n in names)]


def with_sink_outlets(sql: object, kwargs: dict[str, Any]) -> None:
    """Default an operator's ``outlets`` (in its ``kwargs``) to the Assets of what ``sql``
    writes."""
    if "outlets" not in kwargs:
        kwargs["outlets"] = sink_assets(sql, kwargs.get("streamql_conn_id", DEFAULT_CONN_ID))


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """``streamql://<connection id>/<NAME>`` with the name upper-case, as the catalog keeps
    it; ValueError for anything else."""
    name = uri.path.strip("/")
    if not uri.netloc or not name or "/" in name or uri.query:
        raise ValueError(f"a streamql asset URI is streamql://<connection id>/<stream or table>, not {uri.geturl()!r}")
    try:
        name = check_object_name(name, "stream or table")
    except StreamQLError as e:
        raise ValueError(f"{uri.geturl()!r}: {e}") from None
    return uri._replace(path=f"/{name}")


def create_asset(*, path: str, extra: dict[str, Any] | None = None) -> Asset:
    """The Asset of ``<connection id>/<NAME>`` (Airflow's factory for the scheme)."""
    return Asset(uri=f"{SCHEME}://{path}", extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any):
    """The dataset lineage names the stream by: its file topic or Kafka topic, read from the
    connection's catalog (as the operators report it); ``streamql://<connection id>`` and
    the name when the catalog cannot tell."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    from ..hooks.streamql import StreamQLHook

    parsed = sanitize_uri(urlsplit(asset.uri))
    conn_id, name = parsed.netloc, parsed.path.lstrip("/")
    try:
        conn = StreamQLHook.get_connection(conn_id)
        engine = StreamQLHook.engine_for(conn)
        try:
            ds = engine.dataset(name, kafka_bootstrap=StreamQLHook.settings(conn)["kafka_bootstrap_servers"])
        finally:
            engine.close()
        if ds is not None:
            return Dataset(namespace=ds.namespace, name=ds.name)
    except Exception:  # lineage must never fail a task: fall back to the URI's own names
        pass
    return Dataset(namespace=f"{SCHEME}://{conn_id}", name=name)
