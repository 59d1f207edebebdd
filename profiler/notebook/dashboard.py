"""``Trace.dashboard()``: the full Dash dashboard inline in a notebook, through Dash's Jupyter mode.

The profiler never imports the dashboard package (imports point one way: dashboard -> profiler).  The app factory
is found the way ``trnprof serve`` is: through an entry point, group ``trnprof.apps``, name ``dashboard``
(declared in pyproject.toml as ``dashboard.app:create_app``).  The factory is called with the trace's path, as
``trnprof serve PATH`` would be; Dash then serves the app from a thread of the notebook's kernel and shows it in
an iframe under the cell.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from profiler.errors import CommandError

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Entry-point group of applications built on the profiler, and the dashboard's name in it.
APPS_GROUP = "trnprof.apps"
DASHBOARD_APP = "dashboard"
#: How Dash shows the app: under the cell, as a link, in a new browser tab, or in a JupyterLab tab.
MODES: tuple[str, ...] = ("inline", "external", "tab", "jupyterlab")
DEFAULT_HOST = "127.0.0.1"
#: First port tried when none is given (the next free one is used).
FIRST_PORT = 8050
PORTS_TRIED = 50


def find_app_factory(name: str = DASHBOARD_APP) -> Callable[..., Any]:
    """The app factory registered as ``name`` in the ``trnprof.apps`` entry-point group.

    Raises:
        CommandError: no such entry point (the dashboard is not installed), or it cannot be loaded.
    """
    found = list(entry_points(group=APPS_GROUP, name=name))
    if not found:
        raise CommandError(f"the trnprof {name} is not installed (no {name!r} entry point in group {APPS_GROUP!r}); "
                           "install trnprof with its dashboard (`pip install trnprof`, or `pip install -e .` in a "
                           "checkout) and restart the kernel")
    ep = found[0]
    try:
        factory = ep.load()
    except Exception as exc:  # an entry point can fail in any way its module can
        raise CommandError(f"the {name} entry point ({ep.value}) cannot be loaded: {type(exc).__name__}: {exc} "
                           "(reinstall trnprof)") from None
    if not callable(factory):
        raise CommandError(f"the {name} entry point ({ep.value}) is not an app factory")
    return factory


def free_port(host: str = DEFAULT_HOST, first: int = FIRST_PORT, tries: int = PORTS_TRIED) -> int:
    """The first port from ``first`` on that ``host`` can listen on; CommandError when none of ``tries`` is."""
    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise CommandError(f"no free port on {host} between {first} and {first + tries - 1}; pass port=...")


def in_notebook() -> bool:
    """True inside an IPython kernel or shell (where Dash's Jupyter mode works)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def show_dashboard(trace: Trace, *, mode: str = "inline", height: int = 800, host: str = DEFAULT_HOST,
                   port: int | None = None, factory: Callable[..., Any] | None = None) -> Any:
    """Build the dashboard for ``trace`` and show it in the notebook; returns the Dash app.

    Args:
        trace: the trace to serve.
        mode: ``inline`` (an iframe under the cell), ``external`` (a link), ``tab`` (a new browser tab) or
            ``jupyterlab`` (a JupyterLab tab; needs the jupyterlab-dash extension).
        height: iframe height in pixels (``inline``).
        host: interface to serve on (loopback by default: the dashboard has no authentication).
        port: port to serve on (default: the first free one from 8050).
        factory: the app factory (default: :func:`find_app_factory`).
    """
    if mode not in MODES:
        raise CommandError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if isinstance(height, bool) or not isinstance(height, int) or height < 100:
        raise CommandError(f"height must be a number of pixels >= 100, not {height!r}")
    if not in_notebook():
        raise CommandError("Trace.dashboard() shows the dashboard inside Jupyter; outside a notebook run "
                           f"`trnprof serve {trace.path}`")
    factory = factory or find_app_factory()
    port = free_port(host) if port is None else int(port)
    app = factory([trace.path])
    app.run(jupyter_mode=mode, jupyter_height=height, jupyter_width="100%", host=host, port=port)
    return app
