"""The Streaming queries page: a real `airflow api-server` with the plugin (loaded through
its entry point), a real runtime and a PostgreSQL catalog, driven by Debian's Chromium.
Screenshots go to test-artifacts/ui (or $STREAMQL_ARTIFACTS)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import requests

from airflow_provider_streamql.engine import Engine

from .conftest import REPO, _free_port, _new_pg_database
from .support import insert, reconcile_passes, spark_streams, table, wait_until

CHROMIUM = os.environ.get("STREAMQL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = os.environ.get("STREAMQL_ARTIFACTS", os.path.join(REPO, "test-artifacts", "ui"))
PASSWORD = "s3cret-catalog-pw"  # in the catalog URL the server uses: must never be shown
PIPELINE = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
CREATE TABLE stats AS SELECT user, COUNT(*) AS n FROM valid GROUP BY user;
"""
VALID, STATS = "CSAS_VALID_1", "CTAS_STATS_2"
JWT_SECRET = "test-jwt-secret"  # the server's [api_auth] jwt_secret: CSRF tokens are signed with it
ONE_DAG = "etl_orders"  # the one DAG user one_dag may edit

# The simple auth manager grants by role only; real deployments (FAB, Keycloak) also grant
# per DAG, and may let a user log in with no DAG rights at all. This auth manager, loaded by
# the API server from [core] auth_manager, adds both, as data: outsider may read no DAG,
# one_dag may read every DAG and edit only etl_orders.
AUTH_MANAGER = f'''
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class PerDagAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None):
        if user.get_name() == "outsider":
            return False
        if user.get_name() == "one_dag" and method != "GET":
            return details is not None and details.id == {ONE_DAG!r}
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity,
                                         details=details)
'''


@pytest.fixture(scope="module")
def ui(tmp_path_factory, postgres_server):
    """The API server on 127.0.0.1 (its [api] base_url) with users admin (admin role),
    viewer (viewer role), outsider (no DAG rights) and one_dag (edits one DAG), its
    streamql_default connection on a fresh PostgreSQL catalog with a password."""
    root = tmp_path_factory.mktemp("ui")
    home = str(root / "streamql")
    catalog = _new_pg_database(postgres_server).replace("streamql@", f"streamql:{PASSWORD}@")
    airflow_home = root / "airflow"
    airflow_home.mkdir()
    (airflow_home / "passwords.json").write_text(json.dumps({user: f"{user}-pw" for user in USERS}))
    (root / "streamql_test_auth.py").write_text(AUTH_MANAGER)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
           "AIRFLOW__CORE__AUTH_MANAGER": "streamql_test_auth.PerDagAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(airflow_home / "passwords.json"),
           "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
           "AIRFLOW__API__BASE_URL": base,
           "AIRFLOW_CONN_STREAMQL_DEFAULT": json.dumps(
               {"conn_type": "streamql", "extra": {"catalog": catalog, "home": home}})}
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    log = open(root / "api-server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "airflow", "api-server", "-H", "127.0.0.1",
                               "-p", str(port), "-w", "1"], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)

    def up():
        try:
            return requests.get(f"{base}/api/v2/version", timeout=2).status_code == 200
        except requests.ConnectionError:
            assert server.poll() is None, (root / "api-server.log").read_text()[-3000:]
            return False
    wait_until(up, 120, "the Airflow API server")
    engine = Engine(catalog, home=home, issuer="test")
    yield {"base": base, "engine": engine, "catalog": catalog, "log": root / "api-server.log"}
    engine.close()
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(60)


def token(ui, user: str) -> str:
    response = requests.post(f"{ui['base']}/auth/token", json={"username": user, "password": f"{user}-pw"})
    assert response.status_code == 201, response.text
    return response.json()["access_token"]


@pytest.fixture(scope="module")
def pipeline(ui):
    ui["engine"].execute(PIPELINE)
    return ui["engine"]


USERS = {"admin": "admin", "viewer": "viewer", "outsider": "viewer", "one_dag": "viewer"}


def page_csrf(ui, bearer: str) -> str | None:
    listed = requests.get(f"{ui['base']}/streamql/api/queries", headers={"Authorization": f"Bearer {bearer}"})
    assert listed.status_code == 200, listed.text
    return listed.json()["csrf_token"]


def csrf_for(ui, kind, user: str, bearer: str) -> str | None:
    """The X-StreamQL-CSRF header of a request: ``True`` the page's token for this session;
    ``"minted"`` one made here with the server's secret (for users the page gives none);
    ``"other-session"`` the page's token of another login of the same user; ``"expired"``
    a correctly signed one whose hour is over; ``"forged"`` one signed with another key."""
    from airflow_provider_streamql.plugins.app import make_csrf_token
    now = int(time.time())
    return {True: lambda: page_csrf(ui, bearer),
            "minted": lambda: make_csrf_token(JWT_SECRET.encode(), user, bearer, now + 600),
            "other-session": lambda: page_csrf(ui, token(ui, user)),
            "expired": lambda: make_csrf_token(JWT_SECRET.encode(), user, bearer, now - 5),
            "forged": lambda: make_csrf_token(b"not-the-server-secret", user, bearer, now + 600)}[kind]()


def call(ui, method: str, path: str, user: str | None = None, csrf: bool | str = False, **headers):
    bearer = token(ui, user) if user else None
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    if csrf:
        headers["X-StreamQL-CSRF"] = csrf_for(ui, csrf, user, bearer)
    headers = {name: value.format(base=ui["base"], base_by_name=ui["base"].replace("127.0.0.1", "localhost"))
               for name, value in headers.items()}
    return requests.request(method, f"{ui['base']}{path}", headers=headers, timeout=30)


# (method, path, user, with the page's CSRF token, extra headers, status)
ROUTES = [
    ("GET", "/streamql/", None, False, {}, 401),
    ("GET", "/streamql/api/queries", None, False, {}, 401),
    ("GET", f"/streamql/api/queries/{VALID}", None, False, {}, 401),
    ("POST", f"/streamql/api/queries/{VALID}/pause", None, False, {}, 401),
    ("POST", "/streamql/api/all/pause", None, False, {}, 401),
    ("GET", "/streamql/", "viewer", False, {}, 200),
    ("GET", "/streamql/api/queries", "viewer", False, {}, 200),
    ("GET", f"/streamql/api/queries/{VALID}", "viewer", False, {}, 200),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "viewer", False, {}, 403),
    ("POST", "/streamql/api/all/pause", "viewer", False, {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/skip", "viewer", False, {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/skip", "one_dag", "minted", {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/skip", "admin", False, {}, 403),  # no CSRF token
    ("POST", f"/streamql/api/queries/{VALID}/skip", "admin", True, {}, 409),  # no bad record holds it
    ("POST", "/streamql/api/all/skip", "admin", True, {}, 404),  # a skip is one query's
    ("GET", f"/streamql/api/queries/{VALID}/pause", "admin", False, {}, 405),  # state changes are POST only
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", False, {}, 403),  # no CSRF token
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", True, {"Origin": "https://evil.example"}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/nap", "admin", True, {}, 404),
    ("POST", "/streamql/api/queries/CSAS_NOPE_9/pause", "admin", True, {}, 404),
    ("GET", "/streamql/api/queries", "admin", False, {}, 200),
    ("POST", f"/streamql/api/queries/{VALID}/resume", "admin", True, {}, 200),
    # reads need DAG read access (the page itself holds no data: it says why it shows none)
    ("GET", "/streamql/", "outsider", False, {}, 200),
    ("GET", "/streamql/api/queries", "outsider", False, {}, 403),
    ("GET", f"/streamql/api/queries/{VALID}", "outsider", False, {}, 403),
    ("GET", f"/streamql/api/queries?dag_id={ONE_DAG}", "outsider", False, {}, 403),
    # writes need edit access to DAGs in general: editing one DAG, named in the request, is not it
    ("GET", f"/streamql/api/queries/{VALID}", "one_dag", False, {}, 200),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "one_dag", "minted", {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/pause?dag_id={ONE_DAG}", "one_dag", "minted", {}, 403),
    ("POST", f"/streamql/api/all/pause?dag_id={ONE_DAG}", "one_dag", "minted", {}, 403),
    # the CSRF token belongs to one login session and expires
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", "other-session", {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", "expired", {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", "forged", {}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/resume", "admin", "minted", {}, 200),  # the same signer
    # Origin: [api] base_url's, whatever Host a proxy forwards; not Host's own when base_url differs
    ("POST", f"/streamql/api/queries/{VALID}/resume", "admin", True, {"Origin": "{base}"}, 200),
    ("POST", f"/streamql/api/queries/{VALID}/resume", "admin", True,
     {"Origin": "{base}", "Host": "airflow-upstream:8080"}, 200),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", True,
     {"Origin": "http://airflow-upstream:8080", "Host": "airflow-upstream:8080"}, 403),
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", True,
     {"Origin": "{base_by_name}"}, 403),  # the same server under another name
    ("POST", f"/streamql/api/queries/{VALID}/pause", "admin", True, {"Origin": "null"}, 403),
]


@pytest.mark.parametrize("method, path, user, csrf, headers, status", ROUTES)
def test_routes_need_an_airflow_user_and_edit_rights_to_change_state(ui, pipeline, method, path, user,
                                                                     csrf, headers, status):
    response = call(ui, method, path, user, csrf, **headers)
    assert response.status_code == status, response.text
    assert PASSWORD not in response.text and ui["catalog"] not in response.text


def test_refusals_say_why(ui, pipeline):
    expect = [(call(ui, "GET", "/streamql/api/queries", "outsider"), "'outsider' may not read DAGs"),
              (call(ui, "POST", f"/streamql/api/queries/{VALID}/pause?dag_id={ONE_DAG}", "one_dag", "minted"),
               "'one_dag' may not edit DAGs"),
              (call(ui, "POST", f"/streamql/api/queries/{VALID}/pause", "admin", "expired"), "expired"),
              (call(ui, "POST", f"/streamql/api/queries/{VALID}/pause", "admin", "other-session"),
               "another user or login session")]
    for response, reason in expect:
        assert response.status_code == 403 and reason in response.json()["detail"], response.text
    assert pipeline.query(VALID).desired_state == "RUNNING"  # none of them paused it


HEX = "0" * 64  # the shape of a token's HMAC
NOW = 1_800_000_000

# (the X-StreamQL-CSRF header as the check gets it, what the refusal says): every malformed
# token is refused with a reason (a 403), never an exception (a 500)
HOSTILE_TOKENS = [
    ("١٢٣." + HEX, "malformed"),  # Arabic-Indic digits: str.isdigit() and int() take them
    ("١٢٣٤٥٦٧٨٩٠." + HEX, "malformed"),
    ("²³." + HEX, "malformed"),  # superscripts: isdigit() but not int()
    ("9" * 5000 + "." + HEX, "malformed"),  # int() refuses more than 4300 digits
    ("9" * 4301, "malformed"),
    ("9" * 13 + "." + HEX, "malformed"),
    ("2000000000.é", "malformed"),  # non-ASCII text: hmac.compare_digest() refuses it
    ("2000000000." + "é" * 64, "malformed"),
    ("2000000000." + HEX[:-1] + "\u0660", "malformed"),
    ("ünïcödé", "malformed"),
    ("", "malformed"),
    (".", "malformed"),
    ("2000000000", "malformed"),
    ("2000000000.", "malformed"),
    ("-5." + HEX, "malformed"),
    ("+2000000000." + HEX, "malformed"),
    ("1e999." + HEX, "malformed"),
    ("2e9." + HEX, "malformed"),
    (" 2000000000." + HEX, "malformed"),
    ("2000000000." + HEX + "\n", "malformed"),
    ("2000000000." + HEX.upper().replace("0", "A"), "malformed"),
    ("2000000000." + HEX + "." + HEX, "malformed"),
    ("2000000000\x00." + HEX, "malformed"),
    ("2000000000." + HEX, "another user or login session"),  # the right shape, a wrong HMAC
]


@pytest.mark.parametrize("sent, said", HOSTILE_TOKENS)
def test_a_malformed_csrf_token_is_refused_with_a_reason(sent, said):
    from airflow_provider_streamql.plugins.app import csrf_problem
    problem = csrf_problem(sent, "admin", "session-token", now=NOW)
    assert problem is not None and said in problem and "X-StreamQL-CSRF" in problem


@pytest.mark.parametrize("expires, problem", [(NOW + 60, None), (NOW, "expired X-StreamQL-CSRF header"),
                                              (NOW - 1, "expired X-StreamQL-CSRF header")])
def test_a_well_formed_csrf_token_is_checked_for_its_expiry(expires, problem):
    from airflow_provider_streamql.plugins.app import _csrf_secret, csrf_problem, make_csrf_token
    sent = make_csrf_token(_csrf_secret(), "admin", "session-token", expires)
    assert csrf_problem(sent, "admin", "session-token", now=NOW) == (problem and f"{problem}; reload the page")


# headers as raw bytes: the server decodes them as Latin-1 (b"\xb2" is "²", a digit to isdigit())
@pytest.mark.parametrize("header", [b"\xb2\xb3." + HEX.encode(), b"2000000000.\xe9", b"9" * 5000 + b"." + HEX.encode()])
def test_a_malformed_csrf_header_is_a_403_over_http(ui, pipeline, header):
    bearer = token(ui, "admin")
    response = requests.post(f"{ui['base']}/streamql/api/queries/{VALID}/pause", timeout=30,
                             headers={"Authorization": f"Bearer {bearer}", "X-StreamQL-CSRF": header})
    assert response.status_code == 403 and "malformed X-StreamQL-CSRF" in response.json()["detail"], response.text
    assert pipeline.query(VALID).desired_state == "RUNNING"


def test_the_auth_manager_really_lets_one_dag_edit_its_dag(ui, pipeline):
    """What made ``?dag_id=`` dangerous: Airflow's own routes, which take the DAG from the
    request, let one_dag edit etl_orders (404: allowed, but there is no such DAG here)."""
    assert call(ui, "PATCH", f"/api/v2/dags/{ONE_DAG}", "one_dag").status_code not in (401, 403)
    assert call(ui, "PATCH", f"/api/v2/dags/{ONE_DAG}", "viewer").status_code == 403


@pytest.mark.parametrize("base_url, origin, host, allowed", [
    ("", "http://airflow.example:8080", "airflow.example:8080", True),  # no base_url: the Host
    ("", "https://evil.example", "airflow.example:8080", False),
    ("", "null", "airflow.example:8080", False),
    ("https://airflow.example.com/", "https://airflow.example.com", "10.0.0.5:8080", True),  # a proxy
    ("https://airflow.example.com/", "https://AIRFLOW.example.com:443", "10.0.0.5:8080", True),
    ("https://airflow.example.com/airflow", "https://airflow.example.com", "10.0.0.5:8080", True),
    ("https://airflow.example.com/", "http://airflow.example.com", "airflow.example.com", False),
    ("https://airflow.example.com/", "http://10.0.0.5:8080", "10.0.0.5:8080", False),
])
def test_origin_is_checked_against_the_base_url(monkeypatch, base_url, origin, host, allowed):
    from airflow_provider_streamql.plugins.app import origin_allowed
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    assert origin_allowed(origin, host) is allowed


def test_what_each_user_may_do_is_in_the_listing(ui, pipeline):
    viewer = call(ui, "GET", "/streamql/api/queries", "viewer").json()
    admin = call(ui, "GET", "/streamql/api/queries", "admin").json()
    assert (viewer["can_edit"], viewer["csrf_token"]) == (False, None)
    assert admin["can_edit"] is True and admin["csrf_token"]
    assert [q["query_id"] for q in admin["queries"]] == [VALID, STATS]
    browser_login = call(ui, "GET", "/streamql/", Accept="text/html")
    assert browser_login.status_code == 401 and "/auth/login?next=%2Fstreamql%2F" in browser_login.text


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM!r}; run scripts/setup (apt-get install chromium)")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    os.makedirs(ARTIFACTS)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-component-update", "--disable-sync"])
        yield chromium
        chromium.close()


def log_in(browser, ui, user: str, width: int = 1280):
    page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    page.goto(f"{ui['base']}/streamql/")  # 401 page -> Airflow's login -> back to the page
    page.wait_for_selector("input[name=username]", timeout=60_000)
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", f"{user}-pw")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{ui['base']}/streamql/", timeout=60_000)
    page.wait_for_selector(f"tr[data-query-id='{VALID}']", timeout=60_000)
    return page


def state_of(page, query_id: str) -> str:
    return page.inner_text(f"tr[data-query-id='{query_id}'] .state")


def wait_for_state(page, query_id: str, state: str, shown: list | None = None) -> None:
    """Wait until the page shows ``state`` for the query; ``shown`` collects, in order, each
    state the page showed on the way (a state shown on several looks, once)."""
    def check():
        current = state_of(page, query_id)
        if shown is not None and (not shown or shown[-1] != current):
            shown.append(current)
        return current == state
    wait_until(check, 90, f"{query_id} shown {state}")


def refreshed_after_dialog(page, events: list) -> bool:
    """``events`` (("dialog"|"request"|"finished", object), as the page's handlers saw them)
    hold a refresh of the listing that the page sent after the dialog and that finished."""
    page.evaluate("0")  # the sync API delivers the page's events while it waits on the page
    kinds = [kind for kind, _ in events]
    if "dialog" not in kinds:
        return False
    after = events[kinds.index("dialog") + 1:]
    refreshes = [r for kind, r in after
                 if kind == "request" and r.method == "GET" and r.url.endswith("/streamql/api/queries")]
    return any(kind == "finished" and any(r is x for x in refreshes) for kind, r in after)


def test_pause_and_resume_from_the_page(ui, pipeline, browser, runtimes):
    engine = pipeline
    runtime = runtimes.start(engine)
    for query_id in (VALID, STATS):
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    insert(engine, "purchases", [(1, "ann", 5.0)])
    engine.wait_caught_up(VALID, timeout=60)
    engine.wait_caught_up(STATS, timeout=60)

    page = log_in(browser, ui, "admin")
    wait_for_state(page, STATS, "RUNNING")
    page.screenshot(path=f"{ARTIFACTS}/1-running-1280.png", full_page=True)
    assert PASSWORD not in page.content()

    shown = [state_of(page, STATS)]  # RUNNING, as waited for above
    page.click(f"tr[data-query-id='{STATS}'] button[data-action=pause]")
    wait_for_state(page, STATS, "PAUSED", shown)
    # what the user saw, refreshing by itself: the way the runtime really went, RUNNING to
    # PAUSED, through PAUSING if a refresh fell in it; no other state, never back
    assert shown in (["RUNNING", "PAUSING", "PAUSED"], ["RUNNING", "PAUSED"]), shown
    assert page.inner_text(f"tr[data-query-id='{STATS}'] td[data-label='Desired']") == "PAUSED"
    wait_until(lambda: page.inner_text("#message") == f"Paused {STATS}", 30, "the page to say it paused")
    assert page.is_visible(f"tr[data-query-id='{STATS}'] button[data-action=resume]")
    assert not page.is_visible(f"tr[data-query-id='{STATS}'] button[data-action=pause]")
    page.screenshot(path=f"{ARTIFACTS}/2-paused-1280.png", full_page=True)
    assert engine.state(STATS) == "PAUSED"
    assert engine.catalog.commands.all()[-1]["issuer"] == "airflow-ui:admin"
    assert engine.catalog.commands.all()[-1]["statement"] == f"PAUSE {STATS}"

    # the runtime really stopped it: new records pass VALID but do not reach STATS
    insert(engine, "purchases", [(2, "bob", 3.0), (3, "ann", 1.0)])
    engine.wait_caught_up(VALID, timeout=60)
    # passes of the runtime over the paused query since its input arrived, and no streaming
    # query of it in the session: nothing ran it, nor can run it now
    reconcile_passes(engine, runtime.id, passes=3)
    assert STATS not in runtime.active and not spark_streams(runtimes.spark, STATS)
    assert table(engine, "stats") == {"ann": (1,)}
    batch_before = page.inner_text(f"tr[data-query-id='{STATS}'] td[data-label='Last batch']")

    page.click(f"tr[data-query-id='{STATS}'] button[data-action=resume]")
    wait_for_state(page, STATS, "RUNNING")
    engine.wait_caught_up(STATS, timeout=60)
    assert table(engine, "stats") == {"ann": (2,), "bob": (1,)}  # the records arrived, once
    wait_until(lambda: page.inner_text(f"tr[data-query-id='{STATS}'] td[data-label='Last batch']")
               != batch_before, 30, "the page to show the new batch")
    page.screenshot(path=f"{ARTIFACTS}/3-resumed-1280.png", full_page=True)

    # details: the SQL of each version and its history
    page.click(f"tr[data-query-id='{VALID}'] a.qid")
    page.wait_for_selector("#details .version[data-version='1'] pre", timeout=30_000)
    assert "CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0" in page.inner_text("#details")
    page.screenshot(path=f"{ARTIFACTS}/4-details-1280.png", full_page=True)

    # page-wide buttons ask first; dismissed, the page sends nothing. A request the answer
    # made the page send would leave before the page's next refresh of the listing: once
    # that refresh is back, there is nothing in flight.
    events: list = []
    on_request = lambda request: events.append(("request", request))
    on_finished = lambda request: events.append(("finished", request))
    page.on("request", on_request)
    page.on("requestfinished", on_finished)
    page.once("dialog", lambda dialog: (events.append(("dialog", dialog)), dialog.dismiss()))
    page.click("#pause-all")
    wait_until(lambda: refreshed_after_dialog(page, events), 30, "a refresh after the dialog")
    page.remove_listener("request", on_request)
    page.remove_listener("requestfinished", on_finished)
    assert [r.url for kind, r in events if kind == "request" and r.method != "GET"] == []
    assert {q["desired"] for q in engine.queries()} == {"RUNNING"}  # dismissed: nothing changed
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#pause-all")
    for query_id in (VALID, STATS):
        wait_for_state(page, query_id, "PAUSED")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#resume-all")
    for query_id in (VALID, STATS):
        wait_for_state(page, query_id, "RUNNING")
    page.context.close()


@pytest.mark.parametrize("width", [1280, 400])
def test_the_page_is_usable_at_desktop_and_phone_width(ui, pipeline, browser, width):
    page = log_in(browser, ui, "admin", width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling
    for query_id in (VALID, STATS):
        button = page.locator(f"tr[data-query-id='{query_id}'] button").first
        box = button.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width
    page.goto(f"{ui['base']}/streamql/queries/{STATS}")  # the operators' extra link
    page.wait_for_selector("#details .version pre", timeout=30_000)
    page.screenshot(path=f"{ARTIFACTS}/5-details-{width}.png", full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.context.close()


def test_a_stale_csrf_token_is_renewed_by_the_page(ui, pipeline, browser):
    """A click with a token the server refuses (expired, or made before the session's login
    token was refreshed) fetches a fresh one and goes through."""
    from airflow_provider_streamql.plugins.app import make_csrf_token
    engine = pipeline
    page = log_in(browser, ui, "admin")
    cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "_token")
    expired = make_csrf_token(JWT_SECRET.encode(), "admin", cookie, int(time.time()) - 5)
    for action, desired in (("pause", "PAUSED"), ("resume", "RUNNING")):
        commands = len(engine.catalog.commands.all())
        wait_until(lambda: page.is_visible(f"tr[data-query-id='{STATS}'] button[data-action={action}]"),
                   30, f"the {action} button")
        # set the token and click in one go, so that no poll renews the token in between
        page.evaluate("([expired, selector]) => { csrf = expired; document.querySelector(selector).click(); }",
                      [expired, f"tr[data-query-id='{STATS}'] button[data-action={action}]"])
        wait_until(lambda: engine.query(STATS).desired_state == desired, 30, f"{STATS} desired {desired}")
        assert len(engine.catalog.commands.all()) == commands + 1  # refused once, then applied once
        assert "failed" not in page.inner_text("#message")
    page.context.close()


def test_read_only_users_see_no_buttons(ui, pipeline, browser):
    page = log_in(browser, ui, "viewer")
    assert page.locator("tr[data-query-id] button").count() == 0
    assert not page.is_visible("#pause-all")
    page.screenshot(path=f"{ARTIFACTS}/6-viewer-1280.png", full_page=True)
    page.context.close()


def test_the_page_is_in_the_airflow_navigation(ui, pipeline, browser):
    page = log_in(browser, ui, "admin")
    page.goto(f"{ui['base']}/")
    page.get_by_text("Streaming queries").first.click()
    frame = page.frame_locator("iframe")
    frame.locator(f"tr[data-query-id='{VALID}']").wait_for(timeout=60_000)
    page.screenshot(path=f"{ARTIFACTS}/7-in-airflow-1280.png")
    page.context.close()


def test_bad_records_show_on_the_page(ui, pipeline, browser, runtimes):
    engine = pipeline
    runtimes.start(engine, on_error="PAUSE")
    engine.wait_for_state(VALID, "RUNNING", timeout=120)
    path = engine.catalog.source("PURCHASES").path
    with open(os.path.join(path, ".bad.tmp"), "w") as f:
        f.write('{"id": 9, "user": "eve", "cost": 1.0}\n{"id": 10, "user": "mal", "cost": "lots"}\n')
    os.rename(os.path.join(path, ".bad.tmp"), os.path.join(path, "bad.json"))
    engine.wait_for_state(VALID, "PAUSED", timeout=90)
    page = log_in(browser, ui, "admin")
    wait_for_state(page, VALID, "PAUSED")
    assert "BAD_RECORD" in page.inner_text(f"tr[data-query-id='{VALID}'] .error")
    page.click(f"tr[data-query-id='{VALID}'] a.qid")
    page.wait_for_selector("#details .bad-record[data-status=PENDING]", timeout=30_000)
    shown = page.inner_text("#details .bad-record")
    assert "bad.json:2" in shown and '{"id": 10, "user": "mal", "cost": "lots"}' in shown
    assert "value 'lots' does not fit column 'cost' of type DOUBLE" in shown
    page.screenshot(path=f"{ARTIFACTS}/8-bad-record-1280.png", full_page=True)

    # the lag chart: a point after each of its last batches (their records all processed),
    # then now: the held file's two records
    points = page.locator("#details svg.lag-chart circle.lag-point")
    assert points.count() >= 2 and page.get_attribute("#details svg.lag-chart", "data-unit") == "records"
    assert [points.nth(i).get_attribute("data-lag") for i in range(points.count() - 1)] == ["0"] * (points.count() - 1)
    assert (points.last.get_attribute("data-batch"), points.last.get_attribute("data-lag")) == ("now", "2")

    # Skip bad records, beside the held query: asks first, then runs on past the record
    skip = f"tr[data-query-id='{VALID}'] button[data-action=skip]"
    assert page.inner_text(skip) == "Skip bad records"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(skip)
    wait_for_state(page, VALID, "RUNNING")
    engine.wait_caught_up(VALID, timeout=90)
    assert [r.status for r in engine.bad_records(VALID)] == ["SKIPPED"]
    assert engine.catalog.commands.all()[-1]["statement"] == f"RESUME {VALID} SKIP BAD RECORDS"
    assert engine.catalog.commands.all()[-1]["issuer"] == "airflow-ui:admin"
    assert 9 in [row[0] for row in engine.execute("SELECT id FROM valid")[0].rows]  # the good record of the file
    wait_until(lambda: page.locator(skip).count() == 0, 30, "the button to go once nothing holds it")
    page.screenshot(path=f"{ARTIFACTS}/9-skipped-1280.png", full_page=True)
    page.context.close()


def test_a_rate_limit_shows_on_the_details_page(ui, pipeline, browser):
    """ALTER QUERY's rate limit on the details page: the limit, the version it made with the
    validator's finding, and the command in the query's log."""
    engine = pipeline
    engine.execute(f"ALTER QUERY {STATS} SET max_files_per_batch = 4")
    page = log_in(browser, ui, "admin")
    page.click(f"tr[data-query-id='{STATS}'] a.qid")
    page.wait_for_selector("#details #rate-limit", timeout=30_000)
    assert page.inner_text("#details #rate-limit") == "rate limit: max_files_per_batch = 4"
    shown = page.inner_text("#details")
    assert "RATE_LIMIT_CHANGED: max_files_per_batch no limit -> 4" in shown
    assert f"ALTER QUERY {STATS} SET max_files_per_batch = 4" in shown
    page.screenshot(path=f"{ARTIFACTS}/9-rate-limit-1280.png", full_page=True)
    page.context.close()


def test_an_expectation_shows_on_the_details_page(ui, pipeline, browser):
    """WITH (expect=...) on the details page, with its counts (none yet: no runtime here)."""
    engine = pipeline
    engine.execute("CREATE STREAM checked WITH (expect='cost > 0', on_violation='DROP') AS SELECT * FROM purchases")
    (query,) = [q for q in engine.queries() if q["sink"] == "CHECKED"]
    page = log_in(browser, ui, "admin")
    page.click(f"tr[data-query-id='{query['query_id']}'] a.qid")
    page.wait_for_selector("#details #expectation", timeout=30_000)
    assert page.inner_text("#details #expectation") == (
        "expectation cost > 0 (on_violation DROP): 0 violating rows in the last batch, total 0"
    )
    page.context.close()
