"""CSV export of a timeline view (``/export.csv``): the rows overlapping the view, every column, bounded, and
one-line errors; through Flask's test client on a real database."""

from __future__ import annotations

import csv
import io

import pytest

from dashboard import export
from dashboard.app import create_app
from tracer.sim import run_kernel

HOST = {"Host": "127.0.0.1"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "softmax.trace"
    run_kernel("softmax", {"rows": 1024, "cols": 512}, arch="trn1", trace_path=path)
    app = create_app([path])
    app.trnprof_registry.open("t0")
    yield app
    app.trnprof_registry.close()


def _rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.data.decode())))


@pytest.mark.parametrize("table", ["Instruction", "DmaPacket"])
def test_the_export_holds_every_row_overlapping_the_view(app, table):
    trace = app.trnprof_registry.open("t0")
    t0, t1 = trace.time_range
    start, end = t0 + (t1 - t0) // 3, t0 + (t1 - t0) // 2
    want = trace.sql(f'SELECT id FROM "{table}" WHERE start_ts < {end} AND end_ts > {start} '
                     "ORDER BY start_ts, id").fetchall()
    r = app.server.test_client().get(export.export_href("t0", table, start, end), headers=HOST)
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert f"softmax-{table}-{start}-{end}.csv" in r.headers["Content-Disposition"]
    rows = _rows(r)
    assert [int(x["id"]) for x in rows] == [w[0] for w in want] and len(want) > 5
    assert int(r.headers["X-Trnprof-Rows"]) == len(want) and export.CUT_HEADER not in r.headers
    columns = trace.sql(f'SELECT * FROM "{table}" LIMIT 0').columns
    assert list(rows[0]) == list(columns)   # every column, in the database's order


def test_a_big_view_is_cut_and_says_so(app, monkeypatch):
    monkeypatch.setattr(export, "MAX_EXPORT_ROWS", 7)
    trace = app.trnprof_registry.open("t0")
    t0, t1 = trace.time_range
    r = app.server.test_client().get(export.export_href("t0", "DmaPacket", t0, t1), headers=HOST)
    assert r.status_code == 200 and len(_rows(r)) == 7
    assert r.headers[export.CUT_HEADER] == "first 7 rows of more"


def test_an_empty_view_still_names_the_columns(app):
    trace = app.trnprof_registry.open("t0")
    t1 = trace.time_range[1]
    r = app.server.test_client().get(export.export_href("t0", "slice", t1 + 10, t1 + 20), headers=HOST)
    assert r.status_code == 200 and r.data.decode().splitlines() == [
        ",".join(f'"{c}"' for c in trace.sql("SELECT * FROM slice LIMIT 0").columns)]


@pytest.mark.parametrize(("query", "status", "text"), [
    ("trace=t0&table=Span2&start=0&end=5", 400, "table must be one of Instruction, DmaPacket, slice"),
    ("trace=t0&table=Instruction&start=a&end=5", 400, "start and end must be integer nanoseconds"),
    ("trace=t0&table=Instruction&end=5", 400, "start and end must be integer nanoseconds"),
    ("trace=t0&table=Instruction&start=9&end=5", 400, "start before end"),
    ("trace=t0&table=Instruction&start=0&end=99999999999999999999", 400, "within +-2**62"),
    ("trace=../../etc/passwd&table=Instruction&start=0&end=5", 404, "no served trace has id"),
    ("trace=t99&table=Instruction", 404, "no served trace has id"),  # (it said: start and end must be integers)
    ("trace=t0&table=Instruction%3B%20DROP&start=0&end=5", 400, "table must be one of"),
])
def test_bad_requests_get_one_line(app, query, status, text):
    r = app.server.test_client().get(f"{export.EXPORT_PATH}?{query}", headers=HOST)
    assert r.status_code == status
    body = r.data.decode()
    assert text in body and body.count("\n") == 1


def test_other_hosts_are_refused(app):
    r = app.server.test_client().get(export.export_href("t0", "Instruction", 0, 10), headers={"Host": "evil.com"})
    assert r.status_code == 403


def test_view_links():
    state = {"trace": "t3", "view": [100, 250]}
    assert export.view_export_hrefs("?trace=t3", state) == [
        "/export.csv?trace=t3&table=Instruction&start=100&end=250",
        "/export.csv?trace=t3&table=DmaPacket&start=100&end=250",
        "/export.csv?trace=t3&table=slice&start=100&end=250"]
    assert export.view_export_hrefs("?trace=t3", {"view": "x"}) == [None, None, None]
    assert export.view_export_hrefs(None, None) == [None, None, None]
