"""The Streaming queries page: a FastAPI app the Airflow API server mounts at /streamql.

Who can do what (docs/ui.md):

- every route needs an authenticated Airflow user (the auth manager's token, as a Bearer
  header or the UI's cookie);
- reading queries (their SQL, errors, bad records) needs read access to DAGs, and changing
  state edit access to DAGs, both asked of the auth manager about DAGs in general, from
  the user alone: never from a request parameter such as ``?dag_id=`` (which Airflow's
  ``requires_access_dag`` would read, letting the editor of one DAG act on all queries);
- a state change is POST only and carries the page's CSRF token: an HMAC, under the API
  server's JWT secret, of the user, a hash of the token the request authenticated with
  (so a token is good for one login session only) and an expiry time; its Origin, when
  there is one, must be ``[api] base_url`` (else the request's Host).

Clicks change desired state through the engine as statement objects (never SQL text) and
are logged as ``airflow-ui:<user>``. Nothing on the page, in a response or in an error
reveals the catalog URL or its password.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import secrets
import threading
import time
from functools import lru_cache
from importlib.resources import files
from typing import Any, Literal
from urllib.parse import urlsplit

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security.utils import get_authorization_scheme_param

from ..engine import DesiredState, Engine
from ..errors import CatalogError, NotFoundError, StateError, StreamQLError
from ..hooks.streamql import StreamQLHook
from .overview import query_details, query_list

CSRF_HEADER = "X-StreamQL-CSRF"
#: seconds a CSRF token is good for; the page fetches a fresh one every 1.5 s
CSRF_TTL = 3600
_engines: dict[tuple, Engine] = {}
_engines_lock = threading.Lock()


def conn_id() -> str:
    """The streamql connection the page uses: ``[streamql] conn_id``, default streamql_default."""
    from airflow.configuration import conf

    return conf.get("streamql", "conn_id", fallback=StreamQLHook.default_conn_name)


def engine() -> Engine:
    """The engine of the connection's current settings, shared by the server's requests."""
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
                fresh = StreamQLHook.engine_for(conn)
            except CatalogError as e:
                raise HTTPException(503, e.message) from None
            for stale in _engines.values():  # the connection was changed: its pooled catalog
                stale.close()  # connections close (one still in use closes when it is done)
            _engines.clear()
            _engines[key] = fresh
        return _engines[key]


@lru_cache(maxsize=1)
def _csrf_secret() -> bytes:
    # the API server's JWT secret is shared by all its workers; else one per process
    from airflow.configuration import conf

    secret = conf.get("api_auth", "jwt_secret", fallback="") or ""
    return secret.encode() or secrets.token_bytes(32)


def auth_token(request: Request) -> str:
    """The token ``request`` authenticated with, chosen as Airflow's ``get_user`` chooses it:
    the Bearer header, else the UI's ``_token`` cookie."""
    scheme, credentials = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() == "bearer" and credentials:
        return credentials
    return request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")


def make_csrf_token(secret: bytes, user_name: str, token: str, expires: int) -> str:
    """``<expires>.<HMAC of the user, the session's token hash and expires>``."""
    session = hashlib.sha256(token.encode()).hexdigest()
    message = f"streamql-csrf\n{user_name}\n{session}\n{expires}".encode()
    return f"{expires}.{hmac.new(secret, message, hashlib.sha256).hexdigest()}"


def csrf_token(user_name: str, token: str, *, now: float | None = None) -> str:
    """A CSRF token for ``user_name``'s session (the auth ``token`` of its requests),
    good for :data:`CSRF_TTL` seconds."""
    expires = int((time.time() if now is None else now) + CSRF_TTL)
    return make_csrf_token(_csrf_secret(), user_name, token, expires)


#: the only shape a CSRF token has: an expiry of ASCII digits (12 at most: the year 33658),
#: a dot and the HMAC's 64 lowercase hex digits. Anything else (Unicode digits, thousands of
#: digits, a sign, an exponent, non-ASCII text) is refused before it is parsed or compared.
_CSRF_TOKEN = re.compile(r"([0-9]{1,12})\.[0-9a-f]{64}")


def csrf_problem(sent: str, user_name: str, token: str, *, now: float | None = None) -> str | None:
    """Why ``sent`` is not a valid CSRF token of this user and session (None: it is). Any
    text is answered with a reason, never an exception (a malformed header is a 403, not a 500)."""
    shape = _CSRF_TOKEN.fullmatch(sent)
    if shape is None:
        return f"missing or malformed {CSRF_HEADER} header; reload the page"
    expires = int(shape.group(1))
    expected = make_csrf_token(_csrf_secret(), user_name, token, expires)
    if not hmac.compare_digest(sent.encode("ascii"), expected.encode("ascii")):
        return f"wrong {CSRF_HEADER} header (made for another user or login session); reload the page"
    if expires <= (time.time() if now is None else now):
        return f"expired {CSRF_HEADER} header; reload the page"
    return None


def can_edit(user) -> bool:
    return bool(get_auth_manager().is_authorized_dag(method="PUT", user=user))


def requires_dag_access(method: Literal["GET", "POST", "PUT", "DELETE"]):
    """A dependency: the user may ``method`` (GET: read, PUT: edit) DAGs in general. The
    auth manager is asked with no details taken from the request, so no query string or
    path parameter can narrow the question to a DAG the user happens to have rights on."""

    def check(user: GetUserDep) -> None:
        if not get_auth_manager().is_authorized_dag(method=method, user=user):
            what = "read" if method == "GET" else "edit"
            raise HTTPException(
                403,
                f"{user.get_name()!r} may not {what} DAGs, so may not "
                f"{'see' if method == 'GET' else 'change'} streaming queries",
            )

    return check


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of a URL, default ports filled in; None if it has none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port or {"http": 80, "https": 443}.get(scheme)


def origin_allowed(origin: str, host: str | None) -> bool:
    """Whether a request with this ``Origin`` comes from the server's own pages: the origin
    of ``[api] base_url`` when it is set (behind a proxy the Host header is the proxy's
    upstream, not what the browser shows), else the request's ``Host``."""
    from airflow.configuration import conf

    expected = _origin(conf.get("api", "base_url", fallback="") or "")
    if expected is not None:
        return _origin(origin) == expected
    return (
        host is not None
        and bool(host)
        and _origin(origin) is not None
        and urlsplit(origin).netloc.lower() == host.lower()
    )


def check_state_change(request: Request, user: GetUserDep) -> None:
    """CSRF checks for a POST that changes state (permission is checked by its own dependency)."""
    origin = request.headers.get("origin")
    if origin and not origin_allowed(origin, request.headers.get("host")):
        raise HTTPException(403, f"cross-site request from {origin!r} refused")
    problem = csrf_problem(request.headers.get(CSRF_HEADER, ""), user.get_name(), auth_token(request))
    if problem:
        raise HTTPException(403, problem)


READ = [Depends(requires_dag_access("GET"))]
EDIT = [Depends(requires_dag_access("PUT")), Depends(check_state_change)]

app = FastAPI(
    title="StreamQL",
    description="Streaming queries: state, throughput, pause and resume",
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)


@app.exception_handler(HTTPException)
async def _errors(request: Request, exc: HTTPException):
    """JSON errors, except that a browser opening the page unauthenticated gets a 401 page
    that sends it to Airflow's login and back."""
    if exc.status_code == 401 and request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        back = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        login = html.escape(get_auth_manager().get_url_login(next_url=back), quote=True)
        return HTMLResponse(
            f'<!doctype html><meta http-equiv="refresh" content="0; url={login}">'
            f'<p>Sign in to Airflow to see the streaming queries: <a href="{login}">'
            f"log in</a></p>",
            status_code=401,
        )
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


@app.get("/api/queries", dependencies=READ)
def list_queries(request: Request, user: GetUserDep) -> dict[str, Any]:
    """Every query; for an editor also a fresh CSRF token (the page polls this, so its
    token never gets old)."""
    editable = can_edit(user)
    return {
        "queries": _call(query_list, engine()),
        "user": user.get_name(),
        "can_edit": editable,
        "csrf_token": csrf_token(user.get_name(), auth_token(request)) if editable else None,
    }


@app.get("/api/queries/{query_id}", dependencies=READ)
def get_query(query_id: str, user: GetUserDep) -> dict[str, Any]:
    return _call(query_details, engine(), query_id)


@app.post("/api/queries/{query_id}/{action}", dependencies=EDIT)
def change_query(query_id: str, action: str, user: GetUserDep) -> dict[str, Any]:
    verb, skip = _verb(action, SINGLE_ACTIONS)
    e = engine()
    query = _call(e.query, query_id)
    result = _call(e.control, verb, query.id, skip_bad_records=skip, pipeline=query.pipeline, issuer=_issuer(user))
    return {"message": result.message, "waits": result.waits}


@app.post("/api/all/{action}", dependencies=EDIT)
def change_all(action: str, user: GetUserDep) -> dict[str, Any]:
    """Pause or resume every query of every pipeline (ALL is per pipeline in StreamQL)."""
    verb, _ = _verb(action, ALL_ACTIONS)
    e = engine()
    pipelines = sorted({q.pipeline for q in e.query_infos() if q.desired_state != DesiredState.TERMINATED})
    results = [_call(e.control, verb, None, pipeline=p, issuer=_issuer(user)) for p in pipelines]
    return {
        "message": "; ".join(r.message for r in results) or "no queries",
        "waits": [w for r in results for w in r.waits],
    }


#: what a button may ask of one query: the statement's verb, and whether it skips the bad
#: records holding the query (``RESUME <q> SKIP BAD RECORDS``)
SINGLE_ACTIONS = {"pause": ("PAUSE", False), "resume": ("RESUME", False), "skip": ("RESUME", True)}
#: what a page-wide button may ask of every query (a skip is decided query by query)
ALL_ACTIONS = {"pause": ("PAUSE", False), "resume": ("RESUME", False)}


def _verb(action: str, actions: dict[str, tuple[str, bool]]) -> tuple[str, bool]:
    if action not in actions:
        raise HTTPException(404, f"unknown action {action!r} ({' or '.join(actions)})")
    return actions[action]


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
    """The first line of an error, any URL's password in it masked, blanks and newlines
    included (the messages of our own code never hold one; this guards against those of
    libraries)."""
    return Engine.error_line(error)


__all__ = ["app", "CSRF_HEADER", "CSRF_TTL", "csrf_token", "make_csrf_token"]
