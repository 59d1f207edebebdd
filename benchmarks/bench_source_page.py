"""Benchmark how long the dashboard's Source page takes to show a kernel's listing, in headless Chromium.

Serves copies of the bundled samples (so their ingest caches land in a temporary directory), opens
``/source?trace=ID`` for each in a fresh Chromium profile and times from the navigation until the listing's rows
are in the page, ``--reps`` times each; prints the median and range per trace as JSON lines.  Most of that time is
the browser building the listing's elements (the server answers in ~50 ms), so the number follows how many
elements a line takes.  To compare two checkouts, run the script in each (``PYTHONPATH=<checkout>``).

    .venv/bin/python benchmarks/bench_source_page.py
    .venv/bin/python benchmarks/bench_source_page.py --reps 5 --traces attention-trn2 mlp-trn2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROME_FLAGS, CHROMEDRIVER, CHROMIUM, Server  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="visits per trace (default 3)")
    parser.add_argument("--traces", nargs="+", default=["attention-trn2", "mlp-trn2", "softmax-trn1"],
                        help="sample traces to open (default: attention-trn2 mlp-trn2 softmax-trn1)")
    args = parser.parse_args(argv)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from dashboard.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name in args.traces:
            shutil.copytree(ROOT / "sample_traces" / f"{name}.trace", Path(tmp) / f"{name}.trace")
            paths.append(Path(tmp) / f"{name}.trace")
        app = create_app(paths)
        for i in range(len(paths)):
            app.trnprof_registry.open(f"t{i}")   # ingested before timing
        server = Server(app)
        opts = webdriver.ChromeOptions()
        for flag in CHROME_FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={Path(tmp) / 'profile'}")
        opts.binary_location = CHROMIUM
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            driver.set_window_size(1600, 1000)
            for i, name in enumerate(args.traces):
                times = []
                for _ in range(args.reps + 1):   # the first visit loads the page's scripts: not counted
                    t0 = time.perf_counter()
                    driver.get(f"{server.url}/source?trace=t{i}")
                    while driver.execute_script("return document.querySelectorAll('#src-table tr').length") < 10:
                        if time.perf_counter() - t0 > 60:
                            raise SystemExit(f"{name}: the listing did not appear within 60 s")
                        time.sleep(0.02)
                    times.append(time.perf_counter() - t0)
                times = times[1:]
                print(json.dumps({"trace": name, "seconds_median": round(statistics.median(times), 3),
                                  "seconds_min_max": [round(min(times), 3), round(max(times), 3)],
                                  "reps": args.reps, "load_average_1min": round(os.getloadavg()[0], 2)}),
                      flush=True)
        finally:
            driver.quit()
            server.stop()
            app.trnprof_registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
