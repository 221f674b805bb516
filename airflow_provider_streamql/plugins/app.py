"""The Streaming queries page: a FastAPI app the Airflow API server mounts at /streamql.

Every route needs an authenticated Airflow user (the auth manager's token, as a Bearer
header or the UI's cookie); changing state also needs permission to edit DAGs, is POST
only, and must carry the page's CSRF token (a custom header a cross-site form cannot
send), with the request's Origin, when there is one, the server's own. Clicks change
desired state through the engine and are logged as ``airflow-ui:<user>``. Nothing on the
page or in a response reveals the catalog URL.
"""
from __future__ import annotations

import hashlib
import hmac
import html
import secrets
import threading
from functools import lru_cache
from importlib.resources import files
from typing import Any
from urllib.parse import urlparse

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse

from ..engine import Engine
from ..errors import CatalogError, NotFoundError, StateError, StreamQLError
from ..hooks.streamql import StreamQLHook
from ..overview import query_details, query_list

CSRF_HEADER = "X-StreamQL-CSRF"
_engines: dict[tuple, Engine] = {}
_engines_lock = threading.Lock()


def conn_id() -> str:
    """The streamql connection the page uses: ``[streamql] conn_id``, default streamql_default."""
    from airflow.configuration import conf
    return conf.get("streamql", "conn_id", fallback=StreamQLHook.default_conn_name)


def engine() -> Engine:
    """One engine per connection setting, shared by the server's requests."""
    from airflow.models.connection import Connection
    try:
        conn = Connection.get_connection_from_secrets(conn_id())
        settings = StreamQLHook.settings(conn)
    except Exception as e:  # a missing or wrong connection: say which, show no secret
        raise HTTPException(503, f"streamql connection {conn_id()!r}: {_first_line(e)}") from None
    key = tuple(sorted(settings.items()))
    with _engines_lock:
        if key not in _engines:
            try:
                _engines[key] = StreamQLHook.engine_for(conn)
            except CatalogError as e:
                raise HTTPException(503, e.message) from None
        return _engines[key]


@lru_cache(maxsize=1)
def _csrf_secret() -> bytes:
    # the API server's JWT secret is shared by all its workers; else one per process
    from airflow.configuration import conf
    secret = conf.get("api_auth", "jwt_secret", fallback="") or ""
    return secret.encode() or secrets.token_bytes(32)


def csrf_token(user_name: str) -> str:
    return hmac.new(_csrf_secret(), f"streamql:{user_name}".encode(), hashlib.sha256).hexdigest()


def can_edit(user) -> bool:
    return bool(get_auth_manager().is_authorized_dag(method="PUT", user=user))


def check_state_change(request: Request, user: GetUserDep) -> None:
    """CSRF checks for a POST that changes state (permission is checked by its own dependency)."""
    origin = request.headers.get("origin")
    if origin and urlparse(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"cross-site request from {origin!r} refused")
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent, csrf_token(user.get_name())):
        raise HTTPException(403, f"missing or wrong {CSRF_HEADER} header; reload the page")


EDIT = [Depends(requires_access_dag(method="PUT")), Depends(check_state_change)]

app = FastAPI(title="StreamQL", description="Streaming queries: state, throughput, pause and resume",
              docs_url=None, redoc_url=None, openapi_url=None)


@app.exception_handler(HTTPException)
async def _errors(request: Request, exc: HTTPException):
    """JSON errors, except that a browser opening the page unauthenticated gets a 401 page
    that sends it to Airflow's login and back."""
    if exc.status_code == 401 and request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        back = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        login = html.escape(get_auth_manager().get_url_login(next_url=back), quote=True)
        return HTMLResponse(f'<!doctype html><meta http-equiv="refresh" content="0; url={login}">'
                            f'<p>Sign in to Airflow to see the streaming queries: <a href="{login}">'
                            f'log in</a></p>', status_code=401)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def _page() -> str:
    return files(__package__).joinpath("page.html").read_text(encoding="utf-8")


@app.get("/", response_class=HTMLResponse)
def page(user: GetUserDep) -> HTMLResponse:
    return HTMLResponse(_page(), headers={"Cache-Control": "no-store"})


@app.get("/queries/{query_id}", response_class=HTMLResponse)
def query_page(query_id: str, user: GetUserDep) -> HTMLResponse:
    """The page, opened on one query's details (the operators' extra link)."""
    return page(user)


@app.get("/api/queries")
def list_queries(user: GetUserDep) -> dict[str, Any]:
    editable = can_edit(user)
    return {"queries": _call(query_list, engine()), "user": user.get_name(), "can_edit": editable,
            "csrf_token": csrf_token(user.get_name()) if editable else None}


@app.get("/api/queries/{query_id}")
def get_query(query_id: str, user: GetUserDep) -> dict[str, Any]:
    return _call(query_details, engine(), query_id)


@app.post("/api/queries/{query_id}/{action}", dependencies=EDIT)
def change_query(query_id: str, action: str, user: GetUserDep) -> dict[str, Any]:
    verb = _verb(action)
    e = engine()
    query = _call(e.query, query_id)
    result = _call(e.execute, f"{verb} {query.id}", pipeline=query.pipeline, issuer=_issuer(user))[0]
    return {"message": result.message, "waits": result.waits}


@app.post("/api/all/{action}", dependencies=EDIT)
def change_all(action: str, user: GetUserDep) -> dict[str, Any]:
    """Pause or resume every query of every pipeline (ALL is per pipeline in StreamQL)."""
    verb = _verb(action)
    e = engine()
    pipelines = sorted({q.pipeline for q in e.catalog.queries() if q.desired_state != "TERMINATED"})
    results = [_call(e.execute, f"{verb} ALL", pipeline=p, issuer=_issuer(user))[0] for p in pipelines]
    return {"message": "; ".join(r.message for r in results) or "no queries",
            "waits": [w for r in results for w in r.waits]}


def _verb(action: str) -> str:
    verbs = {"pause": "PAUSE", "resume": "RESUME"}
    if action not in verbs:
        raise HTTPException(404, f"unknown action {action!r} (pause or resume)")
    return verbs[action]


def _issuer(user) -> str:
    return f"airflow-ui:{user.get_name()}"


def _call(function, *args, **kwargs):
    """Engine errors as HTTP errors carrying the engine's message."""
    try:
        return function(*args, **kwargs)
    except NotFoundError as e:
        raise HTTPException(404, e.message) from None
    except StateError as e:
        raise HTTPException(409, e.message) from None
    except CatalogError as e:
        raise HTTPException(503, e.message) from None
    except StreamQLError as e:
        raise HTTPException(400, e.message) from None


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


__all__ = ["app", "CSRF_HEADER", "csrf_token"]
