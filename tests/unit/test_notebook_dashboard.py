"""Trace.dashboard(): the app factory is found through the ``trnprof.apps`` entry point (the profiler never imports
the dashboard), called with the trace, and run in Dash's Jupyter mode; clear errors otherwise."""

from __future__ import annotations

import socket

import pytest

import profiler
from profiler.errors import CommandError
from profiler.notebook import dashboard as nbdash


@pytest.fixture(scope="module")
def trace(notebook_synth_trace):
    with profiler.open(notebook_synth_trace) as t:
        yield t


class _RecordingApp:
    def __init__(self, traces):
        self.traces = list(traces)
        self.runs = []

    def run(self, **kwargs):
        self.runs.append(kwargs)


def test_the_entry_point_names_the_dashboard_app_factory():
    from dashboard.app import create_app

    assert nbdash.find_app_factory() is create_app


def test_no_entry_point_means_the_dashboard_is_not_installed(monkeypatch):
    monkeypatch.setattr(nbdash, "entry_points", lambda **_kw: [])
    with pytest.raises(CommandError, match="dashboard is not installed.*pip install") as info:
        nbdash.find_app_factory()
    assert "\n" not in str(info.value)


def test_a_broken_entry_point_is_named(monkeypatch):
    class Broken:
        value = "missing_module:create_app"

        def load(self):
            raise ModuleNotFoundError("No module named 'missing_module'")

    monkeypatch.setattr(nbdash, "entry_points", lambda **_kw: [Broken()])
    with pytest.raises(CommandError, match="missing_module:create_app.*cannot be loaded"):
        nbdash.find_app_factory()


def test_outside_a_notebook_it_points_to_trnprof_serve(trace, monkeypatch):
    monkeypatch.setattr(nbdash, "in_notebook", lambda: False)
    with pytest.raises(CommandError, match="trnprof serve"):
        trace.dashboard()


def test_runs_the_factorys_app_inline_on_a_free_loopback_port(trace, monkeypatch):
    monkeypatch.setattr(nbdash, "in_notebook", lambda: True)
    apps = []

    def factory(traces):
        apps.append(_RecordingApp(traces))
        return apps[-1]

    monkeypatch.setattr(nbdash, "find_app_factory", lambda name=nbdash.DASHBOARD_APP: factory)
    assert trace.dashboard(height=600) is None
    (app,) = apps
    assert app.traces == [trace.path]
    (run,) = app.runs
    assert run["jupyter_mode"] == "inline" and run["jupyter_height"] == 600 and run["host"] == "127.0.0.1"
    with socket.socket() as s:  # the port was free when chosen
        s.bind(("127.0.0.1", run["port"]))


def test_the_real_factory_builds_an_app_serving_this_trace(trace, monkeypatch):
    monkeypatch.setattr(nbdash, "in_notebook", lambda: True)
    runs = []
    real = nbdash.find_app_factory()

    def factory(traces):
        app = real(traces)
        app.run = lambda **kw: runs.append(kw)
        return app

    app = nbdash.show_dashboard(trace, mode="external", port=8765, factory=factory)
    assert [e.path for e in app.trnprof_registry.entries] == [trace.path.resolve()]
    assert runs == [{"jupyter_mode": "external", "jupyter_height": 800, "jupyter_width": "100%",
                     "host": "127.0.0.1", "port": 8765}]


@pytest.mark.parametrize(("kwargs", "message"), [({"mode": "popup"}, "mode must be one of"),
                                                 ({"height": 10}, "height"), ({"height": "tall"}, "height")])
def test_bad_arguments(trace, monkeypatch, kwargs, message):
    monkeypatch.setattr(nbdash, "in_notebook", lambda: True)
    with pytest.raises(CommandError, match=message):
        trace.dashboard(**kwargs)


def test_free_port_skips_a_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        port = nbdash.free_port("127.0.0.1", first=taken, tries=20)
    assert port != taken and taken < port < taken + 20


def test_the_dashboard_opens_the_trace_the_notebook_holds_open(trace):
    # The dashboard's registry opens the trace by its path while the notebook keeps using its own Trace.
    from dashboard.registry import TraceRegistry

    registry = TraceRegistry([trace.path])
    try:
        served = registry.open(registry.default_id)
        assert served.tracks().num_rows == trace.tracks().num_rows
    finally:
        registry.close()
    assert trace.summary()["total_time_ns"] > 0   # still open after the dashboard's copy closed
