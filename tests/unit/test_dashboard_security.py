"""Security of the served dashboard: no route reads a file outside the served traces, traces are chosen by
server-side id only, and the SQL page cannot write files or read the filesystem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboard import sql_logic
from dashboard.app import create_app
from tests.browser.trace_factory import write_kernel_trace

SECRET = "TOP-SECRET-7f3a9c"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("sec")
    (root / "secret.txt").write_text(SECRET)
    trace = write_kernel_trace(root / "k.trace", iterations=20)
    app = create_app([trace])
    app.trnprof_registry.open("t0")
    yield app, root
    app.trnprof_registry.close()


TRAVERSALS = [
    "/assets/../app.py", "/assets/..%2fapp.py", "/assets/%2e%2e/%2e%2e/pyproject.toml", "/assets/....//app.py",
    "/assets//etc/passwd", "/assets/%2fetc%2fpasswd", "/assets/..\\app.py",
    "/_dash-component-suites/dash/../../../../../etc/passwd", "/_dash-component-suites/dash/..%2f..%2fpyproject.toml",
    "/_dash-component-suites/dashboard/app.py", "/_dash-component-suites/dash/deps/../../../../secret.txt",
    "/_dash-layout/../../etc/passwd", "/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
    "/_favicon.ico/../../etc/passwd", "/_reload-hash/../secret.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_route_serves_files_outside_the_assets(served, path):
    app, _root = served
    client = app.server.test_client()
    resp = client.get(path)
    body = resp.get_data()
    assert SECRET.encode() not in body
    assert b"root:x:0:0" not in body
    assert b"def create_app" not in body and b"[build-system]" not in body
    if resp.status_code == 200:   # Dash answers unknown paths with its page shell (client-side routing)
        assert b"DashRenderer" in body or resp.mimetype == "image/x-icon", body[:200]
    else:
        assert resp.status_code in (301, 308, 400, 403, 404, 405)


def test_secret_file_path_as_trace_id_is_refused(served):
    app, root = served
    client = app.server.test_client()
    for search in (f"?trace={root / 'secret.txt'}", "?trace=../secret.txt", "?trace=t0/../../secret.txt",
                   "?trace=" + "A" * 5000):
        payload = {
            "output": "..page-content.children...app-error.children..",
            "outputs": [{"id": "page-content", "property": "children"}, {"id": "app-error", "property": "children"}],
            "inputs": [{"id": "url", "property": "pathname", "value": "/"},
                       {"id": "url", "property": "search", "value": search}],
            "changedPropIds": ["url.search"], "state": [],
        }
        resp = client.post("/_dash-update-component", data=json.dumps(payload), content_type="application/json")
        assert resp.status_code == 200
        body = resp.get_data(as_text=True)
        assert "no served trace has id" in body and SECRET not in body


def test_served_assets_still_work(served):
    app, _ = served
    client = app.server.test_client()
    assert client.get("/assets/trnprof.js").status_code == 200
    resp = client.get("/")
    assert resp.status_code == 200 and resp.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("query", [
    "COPY Instruction TO '{out}'",
    "COPY (SELECT 1) TO '{out}' (FORMAT csv)",
    "EXPORT DATABASE '{dir}'",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_blob('{secret}')",
    "SELECT * FROM '{secret}'",
    "SELECT * FROM glob('{dir}/*')",
    "ATTACH '{dir}/other.duckdb' AS other",
    "CREATE TABLE stolen AS SELECT 1",
    "INSERT INTO Instruction (id) VALUES (1)",
    "DROP TABLE Instruction",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SELECT 1; COPY Instruction TO '{out}'",
    "PRAGMA database_list; COPY (SELECT 2) TO '{out}'",
])
def test_sql_page_cannot_write_or_read_files(served, query):
    app, root = served
    out = root / "exfil.csv"
    text = query.format(out=out, dir=root, secret=root / "secret.txt")
    res = sql_logic.run_query(app.trnprof_registry.open("t0"), text)
    assert res.error, f"allowed: {text}"
    assert "\n" not in res.error
    assert SECRET not in json.dumps(res.rows)
    assert not out.exists()
    assert not (root / "other.duckdb").exists()
    assert sorted(p.name for p in root.iterdir() if p.is_file()) == sorted(
        p.name for p in root.iterdir() if p.is_file() and p.name != "exfil.csv")


def test_sql_route_goes_through_the_sandbox(served):
    app, root = served
    client = app.server.test_client()
    payload = {
        "output": "..sql-grid.rowData...sql-grid.columnDefs...sql-status.children..",
        "outputs": [{"id": "sql-grid", "property": "rowData"}, {"id": "sql-grid", "property": "columnDefs"},
                    {"id": "sql-status", "property": "children"}],
        "inputs": [{"id": "sql-run", "property": "n_clicks", "value": 1}],
        "state": [{"id": "sql-query", "property": "value", "value": f"SELECT * FROM read_text('{root}/secret.txt')"},
                  {"id": "sql-limit", "property": "value", "value": 10},
                  {"id": "sql-timeout", "property": "value", "value": 5},
                  {"id": "url", "property": "search", "value": "?trace=t0"}],
        "changedPropIds": ["sql-run.n_clicks"],
    }
    resp = client.post("/_dash-update-component", data=json.dumps(payload), content_type="application/json")
    assert resp.status_code == 200
    body = resp.get_data(as_text=True)
    assert SECRET not in body and "sql-error" in body
    assert Path(root / "secret.txt").read_text() == SECRET


# -- DNS rebinding: Host and Origin ----------------------------------------------------------------------------
def _sql_payload(query: str = "SELECT 42 AS answer") -> dict:
    return {
        "output": "..sql-grid.rowData...sql-grid.columnDefs...sql-status.children..",
        "outputs": [{"id": "sql-grid", "property": "rowData"}, {"id": "sql-grid", "property": "columnDefs"},
                    {"id": "sql-status", "property": "children"}],
        "inputs": [{"id": "sql-run", "property": "n_clicks", "value": 1}],
        "state": [{"id": "sql-query", "property": "value", "value": query},
                  {"id": "sql-limit", "property": "value", "value": 10},
                  {"id": "sql-timeout", "property": "value", "value": 5},
                  {"id": "url", "property": "search", "value": "?trace=t0"}],
        "changedPropIds": ["sql-run.n_clicks"],
    }


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example:8765", "Origin": "http://evil.example"},   # the rebinding attack itself
    {"Host": "evil.example:8765"},
    {"Host": "127.0.0.1.evil.example"},
    {"Host": "localhost.evil.example:8050"},
    {"Host": "localhost:8050", "Origin": "http://evil.example"},      # a cross-site request
    {"Host": "localhost:8050", "Origin": "null"},
    {"Host": "localhost:8050", "Origin": "http://localhost:notaport"},
    {"Host": "[::1"},
    {"Host": "user@localhost"},
    {"Host": "10.1.2.3:8050"},
])
def test_requests_for_other_hosts_are_refused(served, headers):
    app, _ = served
    client = app.server.test_client()
    for resp in (client.post("/_dash-update-component", data=json.dumps(_sql_payload()),
                             content_type="application/json", headers=headers),
                 client.get("/", headers=headers), client.get("/_dash-layout", headers=headers)):
        assert resp.status_code == 403
        body = resp.get_data(as_text=True)
        assert body.count("\n") == 1 and "42" not in body and "--allow-host" in body


@pytest.mark.parametrize("headers", [
    {"Host": "localhost:8765"}, {"Host": "LOCALHOST"}, {"Host": "127.0.0.1:8050"}, {"Host": "127.8.9.10"},
    {"Host": "[::1]:8050"}, {"Host": "app.localhost:8050"},
    {"Host": "127.0.0.1:8050", "Origin": "http://127.0.0.1:8050"}, {"Host": "[::1]:1", "Origin": "http://[::1]:1"},
    {"Host": "localhost:8050", "Origin": "https://localhost"},
    {"Host": "0.0.0.0:8050", "Origin": "http://0.0.0.0:8050"},   # a server on every interface, opened as 0.0.0.0
])
def test_loopback_hosts_and_origins_are_served(served, headers):
    app, _ = served
    resp = app.server.test_client().post("/_dash-update-component", data=json.dumps(_sql_payload()),
                                         content_type="application/json", headers=headers)
    assert resp.status_code == 200 and "42" in resp.get_data(as_text=True)


def test_allowed_hosts_widen_the_check(tmp_path, monkeypatch):
    from dashboard.hosts import ALLOW_HOSTS_ENV, HostPolicy

    trace = write_kernel_trace(tmp_path / "k.trace", iterations=5)
    named = create_app([trace], allowed_hosts=["dash.example"]).server.test_client()
    assert named.get("/", headers={"Host": "dash.example:8050"}).status_code == 200
    assert named.get("/", headers={"Host": "dash.example", "Origin": "http://dash.example:8050"}).status_code == 200
    assert named.get("/", headers={"Host": "other.example"}).status_code == 403
    every = create_app([trace], allowed_hosts=HostPolicy.for_server("0.0.0.0")).server.test_client()
    # on every interface, any IP address is a host; a name is not (a DNS-rebinding page sends its own name, with
    # a matching Origin) unless --allow-host lists it
    assert every.get("/", headers={"Host": "10.1.2.3:8050"}).status_code == 200
    assert every.get("/", headers={"Host": "[fe80::1]:8050", "Origin": "http://[fe80::1]:8050"}).status_code == 200
    rebinding = every.post("/_dash-update-component", data="{}", content_type="application/json",
                           headers={"Host": "evil.example", "Origin": "http://evil.example"})
    assert rebinding.status_code == 403 and b"IP addresses and localhost, not names" in rebinding.data
    assert every.get("/", headers={"Host": "10.1.2.3:8050", "Origin": "http://evil.example"}).status_code == 403
    for bind in ("::", "0"):
        assert HostPolicy.for_server(bind) == HostPolicy(any_address=True)
    anyone = create_app([trace], allowed_hosts=HostPolicy.for_server("0.0.0.0", ["*"])).server.test_client()
    assert anyone.get("/", headers={"Host": "box.lan:8050"}).status_code == 200
    # serving any host, a request must still come from the dashboard's own origin (or a loopback one)
    assert anyone.get("/", headers={"Host": "box.lan:8050", "Origin": "http://box.lan:8050"}).status_code == 200
    assert anyone.get("/", headers={"Host": "box.lan:8050", "Origin": "http://evil.example"}).status_code == 403
    monkeypatch.setenv(ALLOW_HOSTS_ENV, "proxy.example, *.ignored")
    from_env = create_app([trace]).server.test_client()
    assert from_env.get("/", headers={"Host": "proxy.example"}).status_code == 200
    assert from_env.get("/", headers={"Host": "evil.example"}).status_code == 403


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", b"[]", b'{"output": 5}', b'{"inputs": {}}',
                                  b"[" * 100_000 + b"]" * 100_000])
def test_a_malformed_callback_request_is_one_fixed_line(served, body):
    """Werkzeug's HTML page, or Python's exception names (AttributeError: 'list' object ...), reached the client."""
    app, _ = served
    resp = app.server.test_client().post("/_dash-update-component", data=body, content_type="application/json")
    assert resp.status_code == 400
    assert resp.get_data(as_text=True) == "malformed callback request (not the JSON the dashboard's page sends)\n"


def test_a_request_body_is_bounded(served):
    from dashboard.errors import MAX_REQUEST_BYTES

    app, _ = served
    resp = app.server.test_client().post("/_dash-update-component", data=b" " * (MAX_REQUEST_BYTES + 1),
                                         content_type="application/json")
    assert resp.status_code == 413 and resp.get_data(as_text=True).startswith("request too large:")
    assert app.server.test_client().get("/").status_code == 200
