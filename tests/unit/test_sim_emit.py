"""The three ways of emitting a trace (child process, thread, inline) write identical tables; writer failures."""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
import time
from array import array
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_fastpath import plain_table
from tracer import TraceReader
from tracer.errors import ConfigError, KernelError, TraceExistsError
from tracer.sim import run_kernel

PARAMS = {"seq": 256, "head_dim": 64}


def _tables(path):
    reader = TraceReader(path)
    return {name: plain_table(reader.read_table(name)) for name in reader.table_names() if name != "Metadata"}


@pytest.mark.parametrize(("kernel", "params"), [
    ("attention", PARAMS),
    # each layer's weights are new HBM tensors: their DMA templates reach the writer process as copies of the
    # first layer's (emit_process.encode_template)
    ("mlp", {"layers": 5, "d_model": 256, "d_ff": 512, "tokens": 128}),
])
def test_emit_modes_write_identical_tables(tmp_path, kernel, params):
    results = {}
    for mode in ("process", "thread", "inline"):
        run_kernel(kernel, params, trace_path=tmp_path / mode, emit=mode)
        results[mode] = _tables(tmp_path / mode)
        assert TraceReader(tmp_path / mode).recording_complete
    for mode in ("thread", "inline"):
        assert results[mode].keys() == results["process"].keys()
        for name, table in results["process"].items():
            assert results[mode][name].equals(table), f"{mode}: table {name} differs"


def test_emitter_errors_surface_before_simulating(tmp_path):
    run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "t")
    with pytest.raises(TraceExistsError, match="a trace already exists here"):
        run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "t")
    with pytest.raises(ConfigError, match="trace emission must be process, thread or inline"):
        run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "u", emit="carrier-pigeon")


def test_writer_process_failures_are_one_line_errors(tmp_path):
    """The child writer failing to start, or dying mid-recording, is a TraceFormatError naming the trace."""
    from tracer.errors import TraceFormatError
    from tracer.sim.arch import cost_model
    from tracer.sim.core import Core
    from tracer.sim.emit_process import ProcessEmitter

    core = Core(cost_model("trn2"))
    bad = ProcessEmitter(core, tmp_path / "bad", overwrite=False, metadata={"no_such_field": 1})
    with pytest.raises(TraceFormatError, match="Metadata has no field 'no_such_field'"):
        bad.close()
    dying = ProcessEmitter(core, tmp_path / "dying", overwrite=False, metadata={})
    dying._proc.kill()
    with pytest.raises(TraceFormatError, match=r"dying: the trace writer process died \(exit code -9\)"):
        dying.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="reads the writer's environment from /proc")
def test_writer_process_keeps_freed_buffers_for_reuse(tmp_path, monkeypatch):
    """The writer process starts with glibc's malloc told to keep big freed blocks (no page faults for every
    chunk's buffers), unless the caller set those variables itself."""
    from tracer.sim import cost_model
    from tracer.sim.core import Core
    from tracer.sim.emit_process import ProcessEmitter
    from tracer.sim.malloc_tuning import MALLOC_ENV

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    emitter = ProcessEmitter(Core(cost_model("trn2")), tmp_path / "t", overwrite=False, metadata={})
    try:
        env: dict[str, str] = {}
        for _ in range(50):   # (read again while the child's environment is not yet its own: once seen in CI)
            raw = Path(f"/proc/{emitter._proc.pid}/environ").read_bytes()
            env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
            if "MALLOC_MMAP_THRESHOLD_" in env:
                break
            time.sleep(0.1)
        assert env["MALLOC_MMAP_THRESHOLD_"] == MALLOC_ENV["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)
        assert env["MALLOC_TRIM_THRESHOLD_"] == "12345"
    finally:
        emitter.close(True)
    assert TraceReader(tmp_path / "t").recording_complete


def test_writer_process_allocates_arrow_buffers_with_glibc(monkeypatch):
    """The writer process's Arrow buffers come from glibc malloc (where the settings above apply), not pyarrow's
    mimalloc (system-time stalls in the writer): pyarrow started with the writer's environment uses the system pool,
    and a pool the caller chose is kept."""
    import subprocess
    import sys

    from tracer.sim import emit_spawn

    probe = [sys.executable, "-c", "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"]
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    env = emit_spawn.child_env()
    assert subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.strip() == "system"
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    assert emit_spawn.child_env()["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"


def test_run_kernel_hands_frozen_objects_back_to_the_collector():
    """run_kernel keeps pre-existing objects out of full GC passes during the run only, and leaves a caller's own
    gc.freeze() alone."""
    import gc

    during = []

    def probe(nc):
        during.append(gc.get_freeze_count())
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        nc.dma_copy(t, nc.input("x", (128, 64), "bf16"))

    try:
        assert gc.get_freeze_count() == 0
        run_kernel(probe)
        assert during[-1] > 1000 and gc.get_freeze_count() == 0
        gc.freeze()
        frozen = gc.get_freeze_count()
        run_kernel(probe)
        # neither frozen again (that would add the objects made since) nor handed back (the count would drop to 0);
        # frozen objects that die meanwhile leave the count, so it may shrink a little
        assert 0 < during[-1] <= frozen and 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("fails", [False, True])
def test_run_kernel_makes_full_collections_rarer_during_the_run_only(fails):
    """Full GC passes come at most every GC_FULL_EVERY middle-generation passes while a kernel runs; the caller's
    thresholds are back afterwards, after a failing kernel too."""
    import gc

    from tracer.sim import runner

    during = []

    def probe(nc):
        during.append(gc.get_threshold())
        t = nc.sbuf_tile((128, 64), "bf16", name="t")
        nc.dma_copy(t, nc.input("x", (128, 64), "bf16"))
        if fails:
            raise ValueError("the kernel's own bug")

    saved = gc.get_threshold()
    try:
        gc.set_threshold(500, 7, 3)
        with contextlib.nullcontext() if not fails else pytest.raises(KernelError, match="the kernel's own bug"):
            run_kernel(probe)
        assert during == [(500, 7, runner.GC_FULL_EVERY)]
        assert gc.get_threshold() == (500, 7, 3)
    finally:
        gc.set_threshold(*saved)


def test_writer_process_imports_this_tracer_not_one_in_the_working_directory(tmp_path, monkeypatch):
    decoy = tmp_path / "tracer"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy tracer package was imported')\n")
    monkeypatch.chdir(tmp_path)
    run_kernel("softmax", {"rows": 128, "cols": 64}, trace_path=tmp_path / "t.trace")
    assert TraceReader(tmp_path / "t.trace").recording_complete


def test_writer_processes_are_reaped_without_the_run_waiting_for_them(tmp_path):
    """A run returns once its writer process has closed every file (the trace is complete then), without waiting
    for that process to exit; a thread reaps it once it has exited, so none piles up, not even as a zombie of a
    process that goes on serving (`record --serve`)."""
    import os
    import time

    from tracer.sim import emit_process

    emit_process._reap(wait=True)  # writers of earlier tests
    for i in range(3):
        run_kernel("softmax", {"rows": 256, "cols": 128}, trace_path=tmp_path / f"{i}.trace", emit="process")
        assert TraceReader(tmp_path / f"{i}.trace").metadata["recording_complete"] is True
        pids = [p.pid for p in emit_process._EXITING]
        deadline = time.monotonic() + 20
        while emit_process._EXITING and time.monotonic() < deadline:   # no _reap call: the thread's doing
            time.sleep(0.02)
        assert emit_process._EXITING == []
        for pid in pids:
            with pytest.raises(ChildProcessError):   # reaped: no zombie left
                os.waitpid(pid, os.WNOHANG)


def test_segment_producers_cross_to_the_writer_process_as_ints():
    """Chunk.s_leaf (per segment, its producer tuples marshalled, as the fast path records them) reaches the writer
    process in the marshalled list the writer process sends, and becomes one int64 array of their fields there:
    the same values in the same order, segment by segment, and a field that was a numpy integer (marshal sends its
    raw bytes) read back as that integer."""
    import marshal

    import numpy as np

    from tracer.sim.records import leaf_values

    sent = [marshal.dumps(((1, 2, 3_000_000_000_000, 0, 7),), 2),
            marshal.dumps(((4, np.int64(-5), 6, 1, 2**40), (0, 1, 2, 1, 9)), 2)]
    back = marshal.loads(marshal.dumps(sent, 2))
    assert leaf_values(back).tolist() == [1, 2, 3_000_000_000_000, 0, 7, 4, -5, 6, 1, 2**40, 0, 1, 2, 1, 9]
    assert leaf_values(sent).tolist() == leaf_values(back).tolist()
    assert leaf_values([]).dtype == np.int64 and len(leaf_values([])) == 0


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc malloc settings")
@pytest.mark.parametrize("tune", [False, True])
def test_a_recording_process_keeps_big_blocks_in_its_heap(tune):
    """tune_this_process (trnprof record calls it) makes glibc serve a 16 MiB block from the heap, where by default
    it maps it fresh (the chunk header's IS_MMAPPED bit)."""
    import subprocess
    import sys

    script = (
        "import ctypes, sys\n"
        "from tracer.sim import malloc_tuning\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]\n"
        "if sys.argv[1] == '1':\n"
        "    assert malloc_tuning.tune_this_process()\n"
        "p = libc.malloc(16 << 20)\n"
        "print(ctypes.c_size_t.from_address(p - 8).value & 2)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", script, "1" if tune else "0"], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == ("0" if tune else "2")


@pytest.mark.parametrize("emit", ["process", "thread", "inline"])
def test_the_simulators_writers_compress_on_one_thread(tmp_path, monkeypatch, emit):
    """Every way of emitting a recording builds its TraceWriter with compression_threads=False: pyarrow's pool
    threads would take CPU time from the simulation (BENCHMARKS.md, "Tracer", round 11)."""
    from multiprocessing.connection import Pipe

    from tracer import writer
    from tracer.sim import cost_model, emit_child

    made = []

    class Spy(writer.TraceWriter):
        def __init__(self, *args, **kwargs):
            made.append(kwargs.get("compression_threads", True))
            super().__init__(*args, **kwargs)

    if emit == "process":  # the child's serve loop, run here on a pipe
        monkeypatch.setattr(emit_child, "TraceWriter", Spy)
        to_child, inbox = Pipe()
        outbox, _from_child = Pipe()
        to_child.send(("setup", str(tmp_path / "t"), False, {}, cost_model("trn2"), []))
        to_child.close()
        # serve ignores SIGINT (the child leaves Ctrl-C to its parent): not in this process, whose later
        # subprocesses would inherit the ignored signal
        import signal

        monkeypatch.setattr(emit_child.signal, "signal", lambda *args: None)
        assert emit_child.serve(inbox, outbox) is not None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    else:
        monkeypatch.setattr(writer, "TraceWriter", Spy)  # runner imports it when it writes the trace itself
        run_kernel("softmax", {"rows": 256, "cols": 64}, trace_path=tmp_path / "t", emit=emit)
    assert made == [False]


def _chunks_of(kernel, params, monkeypatch):
    """The chunks a recording hands over (every 512 instructions), and its core."""
    from tracer.sim import core as core_module
    from tracer.sim import runner

    chunks, cores = [], []

    class Keep:
        def submit(self, chunk):
            chunks.append(chunk)

        def close(self, complete, sources=None, metadata=None):
            pass

    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 512)
    monkeypatch.setattr(runner, "_open_sink", lambda core, *args, **kwargs: (cores.append(core), Keep())[1])
    run_kernel(kernel, params, trace_path="unused")
    return chunks, cores[0]


@pytest.mark.parametrize(("kernel", "params"), [  # ~4-7 K instructions, most on the loop fast path
    ("attention", {"seq": 2048, "head_dim": 64}), ("mlp", {"layers": 48, "d_model": 512, "d_ff": 1024, "tokens": 256}),
    ("matmul_naive", {"M": 2048, "N": 2048, "K": 2048}),
])
def test_chunks_merged_write_the_same_tables(tmp_path, monkeypatch, kernel, params):
    """The writer process merges chunks that wait for it (Chunk.absorb): every way of grouping a recording's chunks
    writes the same tables (ids in a chunk are absolute; rows are ordered by instruction, not by chunk)."""
    from tracer.sim.emitter import Emitter
    from tracer.sim.records import Chunk
    from tracer.writer import TraceWriter

    chunks, core = _chunks_of(kernel, params, monkeypatch)
    assert len(chunks) > 6
    results = []
    for group in (1, 2, 5, len(chunks)):
        merged = []
        for i, chunk in enumerate(chunks):
            copy = Chunk(**{f: (array(v.typecode, v) if isinstance(v, array) else list(v) if isinstance(v, list)
                                else v) for f, v in vars(chunk).items()})  # absorb extends in place
            if i % group:
                merged[-1].absorb(copy)
            else:
                merged.append(copy)
        path = tmp_path / f"g{group}"
        with TraceWriter(path, background_flush=False) as writer:
            emitter = Emitter(core, writer, threaded=False)
            for chunk in merged:
                emitter.emit(chunk)
        results.append(_tables(path))
    for other in results[1:]:
        assert other.keys() == results[0].keys()
        for name, table in results[0].items():
            assert other[name].equals(table), f"table {name} differs"
    with pytest.raises(ValueError, match="does not follow"):
        chunks[2].absorb(chunks[4])


@pytest.mark.skipif(platform.system() != "Linux", reason="stops the writer process with SIGSTOP")
def test_a_writer_process_that_fell_behind_writes_the_same_trace(tmp_path, monkeypatch):
    """The writer process stopped from the first chunk to the end of the simulation finds every chunk waiting
    (through the ring and, once it is full, the pipe), merges them as it reads them, and writes the tables the
    inline emitter writes."""
    import signal

    from tracer.sim import core as core_module
    from tracer.sim import emit_process

    monkeypatch.setattr(core_module, "CHUNK_INSTRUCTIONS", 512)
    real_submit, real_close = emit_process.ProcessEmitter.submit, emit_process.ProcessEmitter.close
    stopped = []

    def submit(self, chunk):
        if not stopped:
            os.kill(self._proc.pid, signal.SIGSTOP)
            stopped.append(self._proc.pid)
        real_submit(self, chunk)

    def close(self, complete=True, sources=None, metadata=None):
        os.kill(self._proc.pid, signal.SIGCONT)
        real_close(self, complete, sources, metadata)

    monkeypatch.setattr(emit_process.ProcessEmitter, "submit", submit)
    monkeypatch.setattr(emit_process.ProcessEmitter, "close", close)
    params = {"layers": 48, "d_model": 512, "d_ff": 1024, "tokens": 256}
    result = run_kernel("mlp", params, trace_path=tmp_path / "process", emit="process")
    assert stopped and result.instructions > 10 * 512
    monkeypatch.setattr(emit_process.ProcessEmitter, "submit", real_submit)
    monkeypatch.setattr(emit_process.ProcessEmitter, "close", real_close)
    run_kernel("mlp", params, trace_path=tmp_path / "inline", emit="inline")
    process, inline = _tables(tmp_path / "process"), _tables(tmp_path / "inline")
    assert process.keys() == inline.keys()
    for name, table in inline.items():
        assert process[name].equals(table), f"table {name} differs"
    assert TraceReader(tmp_path / "process").recording_complete


def _feed_serve(path, chunks, core, *, tail=()):
    """A pipe to a writer process's serve loop holding ``setup``, then ``chunks`` as ProcessEmitter.submit sends
    them without a ring, then the messages of ``tail``; fed from a thread (the pipe holds far less than a few
    chunks) that has filled it by the time this returns.  Returns (inbox, outbox, answers, feeder)."""
    import threading
    import time
    from multiprocessing.connection import Pipe

    from tracer.sim import cost_model
    from tracer.sim.emit_process import encode_template, split_chunk

    to_child, inbox = Pipe()
    outbox, from_child = Pipe()

    def feed():
        to_child.send(("setup", str(path), False, {}, cost_model("trn2"), []))
        sent = [0, 0, 0]
        for chunk in chunks:
            new = [encode_template(t) for t in core.templates[sent[0]:chunk.n_templates]]
            variants = [(v.uid, v.emit_table) for v in core.variants[sent[1]:chunk.n_variants]]
            names = core.names[sent[2]:chunk.n_names]
            sent = [chunk.n_templates, chunk.n_variants, chunk.n_names]
            buffers, header = split_chunk(chunk)
            to_child.send(("chunk", new, variants, names, header, None))
            for buf in buffers:
                to_child.send_bytes(buf)
        for msg in tail:
            to_child.send(msg)
        to_child.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    time.sleep(0.5)  # the chunks wait in the pipe (the feeder blocks on a full pipe until serve reads)
    return inbox, outbox, from_child, feeder


def test_a_bad_message_after_waiting_chunks_keeps_their_rows(tmp_path, monkeypatch):
    """The writer process's serve loop, run here on a pipe holding three chunks and then a message it cannot read:
    it merges the chunks waiting, fails on the bad message with a one-message error to its parent, and the trace
    keeps every row of the chunks read before it (marked incomplete)."""
    from tracer.sim import emit_child

    chunks, core = _chunks_of("matmul_naive", {"M": 2048, "N": 2048, "K": 2048}, monkeypatch)
    inbox, outbox, answers, feeder = _feed_serve(tmp_path / "t", chunks[:3], core,
                                                 tail=[("chunk", "not a chunk message")])
    monkeypatch.setattr(emit_child.signal, "signal", lambda *args: None)  # see the compression-threads test
    assert emit_child.serve(inbox, outbox) == 1
    feeder.join(timeout=10)
    assert answers.recv()[0] == "error"
    reader = TraceReader(tmp_path / "t")
    assert not reader.recording_complete
    ids = reader.read_table("Instruction").column("id").to_pylist()
    assert ids == list(range(sum(len(c) for c in chunks[:3])))


def test_a_chunk_travels_as_its_buffers_and_header(monkeypatch):
    """What the writer process is sent of a chunk (split_chunk: its columns in CHUNK_COLUMNS order, its marshalled
    producers, its header) puts the same chunk together again; parts that are not a chunk's are refused."""
    import marshal
    from array import array

    from tracer.sim.emit_process import split_chunk
    from tracer.sim.records import CHUNK_COLUMNS, Chunk

    chunks, _core = _chunks_of("matmul_naive", {"M": 2048, "N": 2048, "K": 2048}, monkeypatch)
    chunk = max(chunks, key=lambda c: (len(c.s_leaf), len(c.x_instr), len(c)))
    assert len(chunk) and len(chunk.s_leaf) and len(chunk.x_instr)
    buffers, header = split_chunk(chunk)
    assert len(buffers) == len(CHUNK_COLUMNS) + 1
    columns = {}
    for (name, typecode), buf in zip(CHUNK_COLUMNS, buffers, strict=False):
        columns[name] = array(typecode, bytes(memoryview(buf).cast("B")))  # as the bytes arrive
    again = Chunk.from_parts(header, columns, marshal.loads(buffers[-1]))
    assert vars(again) == vars(chunk)
    with pytest.raises(ValueError, match="not the parts of a trace chunk"):
        Chunk.from_parts(header[:-1], columns, [])
    with pytest.raises(ValueError, match="not the parts of a trace chunk"):
        Chunk.from_parts(header, {k: v for k, v in columns.items() if k != "start"}, [])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="counts threads in /proc")
def test_the_writer_process_runs_one_thread(tmp_path, monkeypatch):
    """The writer process starts no thread pools (numpy's OpenBLAS would start a spinning thread per CPU when it
    imports numpy, pyarrow's compression pool one per CPU): its threads would take CPU time from the simulation."""
    from tracer.sim import emit_process

    threads = []
    real_close = emit_process.ProcessEmitter.close

    def close(self, complete=True, sources=None, metadata=None):
        status = Path(f"/proc/{self._proc.pid}/status").read_text()
        threads.append(int(next(ln for ln in status.splitlines() if ln.startswith("Threads:")).split()[1]))
        return real_close(self, complete, sources, metadata)

    monkeypatch.setattr(emit_process.ProcessEmitter, "close", close)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")  # a user's setting for their own process: not the writer's
    run_kernel("matmul_naive", {"M": 1024, "N": 1024, "K": 1024}, trace_path=tmp_path / "t", emit="process")
    assert threads == [1]


def test_a_writer_started_ahead_is_taken_by_the_next_recording(tmp_path):
    """``trnprof record`` starts the writer process before importing the simulator (emit_spawn.prestart): the
    recording takes that writer instead of starting its own, and the trace is whole."""
    from tracer.sim import emit_spawn

    emit_spawn.discard_prestarted()
    emit_spawn.prestart()
    waiting = emit_spawn._prestarted[0].proc
    run_kernel("softmax", {"rows": 256, "cols": 256}, trace_path=tmp_path / "t")
    assert emit_spawn._prestarted == []
    assert waiting.wait(timeout=30) == 0  # it wrote the trace and ended normally (one told nothing exits with 1)
    reader = TraceReader(tmp_path / "t")
    assert reader.recording_complete and reader.read_table("Instruction").num_rows > 0


def test_a_writer_started_ahead_and_not_taken_ends_quietly(monkeypatch, capfd):
    """A writer no recording takes exits when its pipes close, silently; one whose environment no longer matches
    is not taken (the recording starts its own)."""
    from tracer.sim import emit_spawn

    emit_spawn.discard_prestarted()
    emit_spawn.prestart()
    proc = emit_spawn._prestarted[0].proc
    emit_spawn.discard_prestarted()
    assert proc.poll() is not None and emit_spawn._prestarted == []
    emit_spawn.prestart()
    proc = emit_spawn._prestarted[0].proc
    monkeypatch.setenv("TRNPROF_TEST_CHANGED", "1")
    assert emit_spawn.take() is None and proc.poll() is not None
    assert capfd.readouterr().err == ""


def test_the_simulating_process_does_not_load_arrow(tmp_path):
    """The trace is built in the writer process: a traced recording (and an untraced one) leaves pyarrow unloaded
    in the simulating process (~0.05-0.08 s of a short `trnprof record`'s start)."""
    import json
    import subprocess
    import sys

    probe = ("import json, sys\nfrom tracer.sim import run_kernel\n"
             f"run_kernel('softmax', {{'rows': 256, 'cols': 256}}, trace_path={str(tmp_path / 't')!r})\n"
             "run_kernel('softmax', {'rows': 256, 'cols': 256})\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb'))))")
    env = {**os.environ, "TRNPROF_EMIT": "process"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert TraceReader(tmp_path / "t").recording_complete


_SPANS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 30)), max_size=40)


def _lanes_brute_force(spans):
    """Each span, in order, on the lowest lane where every span already placed ends by its start."""
    placed: dict[tuple[int, int], list[tuple[int, int]]] = {}
    lanes = []
    for row, start, length in spans:
        j = 0
        while any(e > start for _s, e in placed.get((row, j), [])):
            j += 1
        placed.setdefault((row, j), []).append((start, start + length))
        lanes.append(j)
    return lanes


@settings(max_examples=300, deadline=None)
@given(_SPANS, st.lists(st.integers(0, 40), max_size=4))
def test_span_lanes_match_a_brute_force_and_do_not_depend_on_chunks(spans, cuts):
    from tracer.sim.span_lanes import SpanLanes

    row = np.array([s[0] for s in spans], np.int64)
    start = np.array([s[1] for s in spans], np.int64)
    end = start + np.array([s[2] for s in spans], np.int64)
    whole = SpanLanes().assign(row, start, end)
    assert whole.tolist() == _lanes_brute_force(spans)
    for i in range(len(spans)):  # a lane's spans never overlap: each starts once every earlier one has ended
        for k in range(i):
            if row[i] == row[k] and whole[i] == whole[k]:
                assert end[k] <= start[i], (i, k)
    lanes = SpanLanes()  # the same spans handed over in chunks
    bounds = [0, *sorted(min(c, len(spans)) for c in cuts), len(spans)]
    pieces = [lanes.assign(row[a:b], start[a:b], end[a:b]) for a, b in itertools.pairwise(bounds)]
    assert np.concatenate([np.zeros(0, np.int32), *pieces]).tolist() == whole.tolist()


def test_a_kernels_pipelined_spans_lie_on_lanes_that_never_overlap(tmp_path):
    """mlp's operators and layers overlap in time (the next starts before the previous ends): the trace puts them on
    lanes (Span.depth), and spans of one row and lane never overlap."""
    run_kernel("mlp", {"layers": 3}, trace_path=tmp_path / "t")
    spans = TraceReader(tmp_path / "t").read_table("Span").to_pylist()
    by_lane: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for s in spans:
        by_lane.setdefault((s["track_name"], s["depth"]), []).append((s["start_ts"], s["end_ts"]))
    assert max(d for _name, d in by_lane) >= 1  # the kernel really pipelines
    for key, intervals in by_lane.items():
        intervals.sort()
        assert all(e <= s for (_s0, e), (s, _e1) in itertools.pairwise(intervals)), key


def test_reaping_a_writer_its_thread_already_removed_is_no_error(monkeypatch):
    """`_reap` (at the next writer's start, at exit) raced the reaper thread: list.remove raised ValueError."""
    from tracer.sim import emit_process

    class Exited:
        def poll(self):
            emit_process._EXITING.clear()   # the thread removes it between the copy and the remove
            return 0

    monkeypatch.setattr(emit_process, "_EXITING", [Exited()])
    emit_process._reap()
    assert emit_process._EXITING == []


def test_a_writer_dying_before_it_wrote_an_instruction_leaves_no_trace(tmp_path):
    """Its death left a directory holding Metadata alone (or nothing), which every command then refused, while
    the error said the trace kept what was written."""
    from tracer.errors import TraceFormatError
    from tracer.sim import run_kernel

    def kernel(nc):
        nc.core.sink.__self__._proc.kill()        # the writer process, killed before it got any chunk
        nc.core.sink.__self__._proc.wait()
        x = nc.input("x", (128, 512), "bf16")
        for _ in nc.sequential_range(4):
            t = nc.sbuf_tile((128, 512), "bf16")
            nc.dma_copy(t, x)

    with pytest.raises(TraceFormatError, match="writer process died .*when it had written no instruction yet"):
        run_kernel(kernel, trace_path=tmp_path / "k.trace", emit="process")
    assert not (tmp_path / "k.trace").exists()
