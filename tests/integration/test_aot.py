"""Ahead-of-time builds of the compiled scheduling loop (:mod:`tracer.aot`): built by a detached process into the
cache, loaded by later processes without numba, the same trace as the Python loop, and every way a cache can be
wrong (damaged, stale, locked, failing, unwritable, switched off) handled without an error reaching the run.

The suite runs with ``TRNPROF_AOT=0`` (tests/conftest.py); these tests turn it on with a cache of their own.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from tests.unit.test_sim_fastpath import KERNEL_CASES, KERNEL_IDS, _assert_same, _run
from tracer import aot
from tracer.sim.fastpath import controller, schedule_jit
from tracer.sim.fastpath import schedule_kernel as K
from tracer.user_cache import CACHE_DIR_ENV

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not schedule_jit._load(), reason="numba is not available")
#: pycc links the build with the platform's C compiler: without one the build fails (and runs use numba's JIT).
needs_cc = pytest.mark.skipif(
    shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None, reason="no C compiler to build with")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), CACHE_DIR_ENV: str(cache), aot.ENV_SWITCH: "1", **extra}


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """A cache holding the kernel's build, made as a run makes it: start_build's detached process."""
    cache = tmp_path_factory.mktemp("trnprof-cache")
    code = ("import sys; from tracer import aot; from tracer.sim.fastpath import schedule_kernel as K; "
            "sys.exit(0 if aot.wait_for_build(K, timeout=300) else 1)")
    done = subprocess.run([sys.executable, "-c", code], env=_env(cache), capture_output=True, text=True,
                          timeout=400, check=False)
    logs = {p.name: p.read_text() for p in (cache / "aot").glob("*") if p.suffix in (".log", ".failed")}
    assert done.returncode == 0, (done.stderr, logs)
    return cache


@pytest.fixture
def use_cache(monkeypatch, cache):
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    return cache


@needs_cc
def test_the_build_lands_complete_and_alone(cache):
    files = sorted(p.name for p in (cache / "aot").iterdir())
    name = aot.build_name(K)
    # the build only: no lock, no log (kept for failures), no temporary directory
    assert files == [name + importlib.machinery.EXTENSION_SUFFIXES[0]]


@needs_cc
def test_a_fresh_process_loads_the_build_without_numba_and_writes_the_python_loops_trace(cache, tmp_path):
    """``trnprof record`` as a user runs it, twice: with the build in the cache, and with the Python loop only."""
    code = textwrap.dedent("""
        import json, sys
        from tracer.sim import run_kernel
        from tracer.sim.fastpath import schedule_jit
        r = run_kernel("matmul_rowload", {"M": 8192, "N": 4096, "K": 1024}, arch="trn2", trace_path=sys.argv[1])
        print(json.dumps({"numba": "numba" in sys.modules, "via": schedule_jit._loaded.get("via"),
                          "fast": r.fast_path_instructions, "n": r.instructions}))
    """)
    out = {}
    for mode, extra in (("aot", {}), ("python", {schedule_jit.ENV_SWITCH: "0"})):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"{mode}.trace")],
                              env=_env(cache, **extra), capture_output=True, text=True, timeout=300, check=True)
        out[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["aot"]["via"] == "aot" and out["aot"]["numba"] is False  # the first segment used it, no numba
    assert out["python"]["via"] is None
    assert out["aot"]["fast"] > 0.5 * out["aot"]["n"]
    from tests.unit.test_sim_fastpath import plain_table
    from tracer import TraceReader

    a, p = TraceReader(tmp_path / "aot.trace"), TraceReader(tmp_path / "python.trace")
    assert a.table_names() == p.table_names()
    for table in a.table_names():
        if table != "Metadata":
            assert plain_table(a.read_table(table)).equals(plain_table(p.read_table(table))), table


@pytest.mark.parametrize(("kernel", "params", "arch", "overrides"), KERNEL_CASES,
                         ids=KERNEL_IDS)
@needs_cc
def test_the_built_kernel_writes_the_python_loops_trace(tmp_path, monkeypatch, use_cache, kernel, params, arch,  # noqa: PLR0917
                                                        overrides):
    monkeypatch.setattr(controller, "TARGET", 32)
    monkeypatch.setattr(controller, "MIN_SEGMENT", 2)
    monkeypatch.setattr(schedule_jit, "MIN_ROWS", 0)
    monkeypatch.setattr(schedule_jit, "_WINDOW", 1)  # the throttle window buffer has to grow
    monkeypatch.setattr(schedule_jit.CoreArrays, "prefill_uniform", lambda *a: None)
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "0")
    python = _run(tmp_path, kernel, params, arch, True, overrides)
    for name in K.COMPILED:
        monkeypatch.setattr(K, name, getattr(K, name))  # restored afterwards
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    assert schedule_jit._load() and schedule_jit._loaded["via"] == "aot"
    built_rows = K.schedule_rows
    assert type(built_rows).__name__ == "builtin_function_or_method"  # the extension's, not numba's dispatcher
    calls = [0]

    def counted(*args):
        calls[0] += 1
        return built_rows(*args)

    monkeypatch.setattr(K, "schedule_rows", counted)
    monkeypatch.setenv(schedule_jit.ENV_SWITCH, "1")
    built = _run(tmp_path, kernel, params, arch, True, overrides)
    assert calls[0] > 0
    _assert_same(python, built)


def test_with_a_build_the_compiled_loop_is_used_from_the_first_segment(monkeypatch):
    monkeypatch.delenv(schedule_jit.ENV_SWITCH, raising=False)
    monkeypatch.setattr(schedule_jit, "_python_rows", [0])
    monkeypatch.setattr(schedule_jit, "_expected", [False])
    monkeypatch.setattr(schedule_jit, "_load", lambda: True)
    monkeypatch.setattr(schedule_jit, "_loaded", {"built": True})
    assert not schedule_jit.use(schedule_jit.MIN_ROWS - 1)
    assert schedule_jit.use(schedule_jit.MIN_ROWS)
    monkeypatch.setattr(schedule_jit, "_loaded", {"built": False})
    assert not schedule_jit.use(schedule_jit.MIN_ROWS)  # without one: numba waits for a long enough run


def test_a_run_without_a_build_starts_one_once(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(aot, "start_build", lambda module: started.append(module) or True)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    monkeypatch.delenv(schedule_jit.ENV_SWITCH, raising=False)
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    monkeypatch.setattr(schedule_jit, "_python_rows", [0])
    monkeypatch.setattr(schedule_jit, "_expected", [False])
    assert not schedule_jit.use(schedule_jit.MIN_ROWS)
    assert not schedule_jit.use(schedule_jit.MIN_ROWS)
    assert started == [K]


def test_a_damaged_build_is_moved_aside_not_rebuilt_and_the_run_goes_on_with_numba(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    path = aot.build_path(K)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x7fELF not really")
    for name in K.COMPILED:
        monkeypatch.setattr(K, name, getattr(K, name))
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert schedule_jit._load()
    assert schedule_jit._loaded["via"] == "jit"
    assert any("ignoring the compiled kernel" in str(w.message) and str(path) in str(w.message) for w in caught)
    assert not path.exists() and path.with_name(path.name + ".bad").exists()
    # a build that failed this way would fail again: none is started (the .bad file stops it)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name + ".bad"]
    assert not aot.start_build(K)


def test_a_build_giving_wrong_answers_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    path = aot.build_path(K)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"stands for a build")

    class Wrong:
        reserve = staticmethod(lambda *a: (0, 0, 0))
        missing_layouts = staticmethod(lambda *a: 0)
        place = staticmethod(lambda *a: 0)
        schedule_rows = staticmethod(lambda *a: 0)

    monkeypatch.setattr(aot, "load", lambda module: Wrong)
    python = {name: getattr(K, name) for name in K.COMPILED}
    for name in K.COMPILED:
        monkeypatch.setattr(K, name, python[name])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not schedule_jit._install_built()
    assert {name: getattr(K, name) for name in K.COMPILED} == python  # the previous functions back in place
    assert any("kernel self-check failed" in str(w.message) for w in caught)
    assert path.with_name(path.name + ".bad").exists()


def test_a_failing_build_is_recorded_and_not_retried(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    path = aot.build_path(K)
    path.parent.mkdir(parents=True)
    wrong = path.with_name("not_the_build_name" + importlib.machinery.EXTENSION_SUFFIXES[0])
    assert aot._take_lock(aot.side_file(wrong, ".lock"))
    assert aot.build_or_fail(K.__name__, wrong) == 1
    assert "is not the build name" in aot.side_file(wrong, ".failed").read_text()
    assert not aot.side_file(wrong, ".lock").exists() and not wrong.exists()
    # the same for the real name: a failure there stops start_build for this source
    aot.side_file(path, ".failed").write_text("RuntimeError: no C compiler\n")
    assert not aot.start_build(K)
    assert not aot.side_file(path, ".lock").exists()


def test_one_build_at_a_time_and_a_dead_builds_lock_is_taken_over(tmp_path):
    lock = tmp_path / "x.lock"
    assert aot._take_lock(lock)
    assert not aot._take_lock(lock)  # another build holds it
    old = time.time() - aot.STALE_LOCK_S - 5
    os.utime(lock, (old, old))
    assert aot._take_lock(lock)  # that build died long ago
    assert lock.read_text() == str(os.getpid())


@needs_cc
def test_a_built_kernel_is_not_rebuilt_and_a_locked_one_not_started_twice(monkeypatch, use_cache, tmp_path):
    assert not aot.start_build(K)  # built already
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    path = aot.build_path(K)
    path.parent.mkdir(parents=True)
    aot.side_file(path, ".lock").write_text("1")
    assert not aot.start_build(K)
    assert not aot.wait_for_build(K, timeout=0.3)


def test_the_build_name_follows_the_source_and_its_constants(monkeypatch, tmp_path):
    src = tmp_path / "aot_probe_kernel.py"

    def name_of(text: str) -> str:
        src.write_text(text)
        monkeypatch.setattr(aot, "_names", {})
        sys.modules.pop("aot_probe_kernel", None)
        return aot.build_name(importlib.import_module("aot_probe_kernel"))

    monkeypatch.syspath_prepend(str(tmp_path))
    base = "N = 4\nCOMPILED = ('f',)\nAOT_SIGNATURES = {'f': 'i8(i8)'}\ndef f(x):\n    return x + N\n"
    first = name_of(base)
    assert first.startswith("aot_probe_kernel_")
    assert name_of(base) == first  # deterministic
    assert name_of(base.replace("x + N", "x - N")) != first  # the code
    assert name_of(base.replace("i8(i8)", "i8(i4)")) != first  # the exported types
    assert name_of(base.replace("N = 4", "from math import pi as N")) != first  # a constant it imports


@needs_cc
def test_switched_off_nothing_is_loaded_or_built(monkeypatch, use_cache):
    assert aot.load(K) is not None
    monkeypatch.setenv(aot.ENV_SWITCH, "0")
    assert aot.load(K) is None
    assert not aot.start_build(K)


def test_a_cache_that_cannot_be_written_does_not_stop_a_run(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker))  # the cache directory would have to be inside a file
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    assert aot.load(K) is None
    assert not aot.start_build(K)


def test_the_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert aot.cache_dir() == tmp_path / "trnprof" / "aot"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert aot.cache_dir() == tmp_path / "home" / ".cache" / "trnprof" / "aot"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "c"))
    assert aot.cache_dir() == tmp_path / "c" / "aot"


def test_record_tells_its_user_about_the_build_it_started(monkeypatch, tmp_path, capsys):
    """The first recording on a machine starts the build (a detached process, here a spy) and says so in one
    line; the recording itself is unchanged."""
    from profiler.cli import main

    spawned = []

    class Popen:
        def __init__(self, argv, **kwargs):
            spawned.append((argv, kwargs))

    monkeypatch.setattr(aot.subprocess, "Popen", Popen)
    monkeypatch.setattr(aot, "_started", [])
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(aot.ENV_SWITCH, "1")
    monkeypatch.delenv(schedule_jit.ENV_SWITCH, raising=False)
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    args = ["record", "matmul_rowload", "-p", "M=4096", "-p", "N=4096", "-p", "K=1024", "--no-trace", "-q"]
    assert main(args) == 0
    err = capsys.readouterr().err
    path = aot.build_path(K)
    assert f"compiling the simulator's scheduling loop in the background, once (~4 CPU-s, into {path.parent})" in err
    ((argv, kwargs),) = spawned
    assert argv[-2:] == [K.__name__, str(path)] and kwargs["start_new_session"] is True
    assert aot.side_file(path, ".lock").exists()  # held for the build process, which releases it
    # a second recording in the same state starts nothing more and says nothing
    monkeypatch.setattr(aot, "_started", [])
    monkeypatch.setattr(schedule_jit, "_loaded", {})
    assert main(args) == 0
    assert "compiling" not in capsys.readouterr().err and len(spawned) == 1


def test_a_finished_build_prunes_all_but_the_newest_builds_of_its_module(tmp_path):
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    mod = "tracer_sim_fastpath_schedule_kernel"
    names = [f"{mod}_{i:016x}" for i in range(7)]
    for age, name in enumerate(reversed(names)):  # names[0] is the oldest
        for ext in (suffix, ".log"):
            p = tmp_path / (name + ext)
            p.write_text("x")
            os.utime(p, (1e9 + 10 * (7 - age), 1e9 + 10 * (7 - age)))
    (tmp_path / (names[0] + suffix + ".bad")).write_text("x")
    other = [tmp_path / f"{mod}_extra_{0:016x}{suffix}", tmp_path / f"tracer_jit_other_{0:016x}{suffix}"]
    for p in other:
        p.write_text("x")
        os.utime(p, (1, 1))
    target = tmp_path / (names[2] + suffix)  # the build just made (not the newest file: clocks differ)
    aot.prune(target, 3)
    left = sorted(p.name for p in tmp_path.iterdir())
    kept = [names[2], names[6], names[5]]  # the target, then the newest two
    assert left == sorted([*(n + e for n in kept for e in (suffix, ".log")), *(p.name for p in other)])
