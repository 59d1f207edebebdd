"""Browser-test harness: one kernel trace, the dashboard served in-process on a free port, headless Chromium.

Chromium and ChromeDriver come from Debian (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; ``tests/run.sh``
installs them); the tests are skipped with a reason when either is missing.  Every wait is for a condition, never
a fixed sleep.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.trace_factory import write_kernel_trace

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000")
WAIT_S = 30


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The dashboard on 127.0.0.1 in a background thread (werkzeug, threaded), stopped by :meth:`stop`."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        self.port = free_port()
        self._server = make_server("127.0.0.1", self.port, app.server, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        self._server.shutdown()
        self._thread.join(timeout=10)


@pytest.fixture(scope="session")
def kernel_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-core kernel trace directory (ingested on first open)."""
    return write_kernel_trace(tmp_path_factory.mktemp("browser") / "kernel.trace", iterations=300, cores=2)


def serving(path: Path) -> Iterator[Server]:
    """The dashboard serving the trace at ``path`` (ingested before the browser asks), until the generator ends:
    ``yield from serving(path)`` in a fixture."""
    from dashboard.app import create_app

    app = create_app([path])
    app.trnprof_registry.open("t0")
    server = Server(app)
    yield server
    server.stop()
    app.trnprof_registry.close()


@pytest.fixture(scope="session")
def dashboard_server(kernel_trace: Path) -> Iterator[Server]:
    """The dashboard serving the kernel trace."""
    yield from serving(kernel_trace)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium with a fresh profile, console logging on."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("chromium / chromedriver not installed (tests/run.sh installs the Debian packages)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="trnprof-chromium-")
    opts.add_argument(f"--user-data-dir={profile}")
    opts.binary_location = CHROMIUM
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: Any, condition: Callable[[Any], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Wait until ``condition(driver)`` is truthy; fail naming ``what`` otherwise.  An element the condition found
    and Dash replaced before it was read (a stale element) is looked for again at the next poll."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        pytest.fail(f"timed out after {timeout} s waiting for {what}")


def console_errors(driver: Any) -> list[str]:
    """Browser console messages of level SEVERE since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def wait_idle(driver: Any, what: str = "the dashboard to settle") -> None:
    """Wait until no Dash callback is in flight (no component marked as loading)."""
    wait_for(driver, lambda d: d.execute_script(
        "return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0 "
        "&& !!document.getElementById('tl-status') && document.getElementById('tl-status').textContent !== '';"),
        what)


def settled(driver: Any) -> bool:
    """Whether no Dash callback is in flight on the page (no component marked as loading)."""
    return driver.execute_script("return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0")


def link_query(driver: Any, element_id: str) -> dict[str, str]:
    """The query values of the link ``element_id`` points to (first value of each key)."""
    from urllib.parse import parse_qs, urlparse

    href = driver.find_element("id", element_id).get_attribute("href")
    return {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
