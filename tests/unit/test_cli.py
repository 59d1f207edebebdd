"""The CLI skeleton: subcommands listed, --help everywhere, one-line errors without tracebacks."""

import importlib
import json
import subprocess
import sys

import pytest

from profiler.cli import get_argument_parser, load_commands, main


def test_help_lists_subcommands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("info", "serve"):
        assert name in out


def test_every_command_has_help(capsys):
    for cmd in load_commands():
        assert main([cmd.name, "--help"]) == 0
        assert cmd.name in capsys.readouterr().out


def test_parser_is_public_and_complete():
    parser = get_argument_parser()
    assert parser.prog == "trnprof"


def test_usage_error_exit_code(capsys):
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_info_text_and_json(small_trace, capsys):
    assert main(["info", str(small_trace)]) == 0
    assert "Instruction" in capsys.readouterr().out
    assert main(["info", str(small_trace), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["tables"]["Instruction"] == 1000
    assert info["recording_complete"] is True


def test_info_of_a_database_and_of_an_importable_profile(small_trace, tmp_path, capsys):
    """A database, or a profile another tool wrote, is described through its database: the trace tables it holds
    with their rows (Span, not the database's own slice table), its metadata and where it came from."""
    import profiler

    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(small_trace), "-o", str(db)]) == 0
    capsys.readouterr()
    assert main(["info", str(db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    with profiler.open(small_trace) as t:
        want = t.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]
    assert info["tables"]["Instruction"] == want == 1000
    assert info["source_format"] == "trnprof-trace" and info["database"] == str(db)
    assert not set(info["tables"]) & {"track", "lod", "slice", "trnprof_info"}   # the database's own tables
    chrome = tmp_path / "t.json"
    chrome.write_text(json.dumps([{"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
                                  {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]))
    assert main(["info", str(chrome)]) == 0
    out = capsys.readouterr().out
    assert "chrome-json" in out and "Span" in out and "2 rows" in out


@pytest.mark.parametrize("make", ["missing", "file", "garbage"])
def test_bad_input_is_one_line_without_traceback(tmp_path, capsys, make):
    target = tmp_path / "x"
    if make == "file":
        target.write_text("hello")
    elif make == "garbage":
        target.mkdir()
        (target / "Metadata.arrows").write_bytes(b"\xff" * 300)
    code = main(["info", str(target)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("trnprof: error: ")
    assert str(target) in err
    assert "Traceback" not in err


def test_internal_errors_are_one_line(monkeypatch, capsys, small_trace):
    from profiler.cli import info

    def boom(path):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(info, "describe_trace", boom)
    monkeypatch.delenv("TRNPROF_DEBUG", raising=False)
    assert main(["info", str(small_trace)]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and "TRNPROF_DEBUG" in err


def test_listed_help_is_each_commands_own():
    """``trnprof --help`` lists the built-in commands from a table, without importing them: the table must say
    what each command says of itself."""
    from profiler.cli import BUILTIN_COMMANDS

    for name, (module, help_) in BUILTIN_COMMANDS.items():
        cmd = importlib.import_module(module).COMMAND
        assert (cmd.name, cmd.help) == (name, help_)


def test_a_command_loads_only_its_own_module(capsys):
    from profiler.cli import BUILTIN_COMMANDS, _Listed, commands_for

    chosen = commands_for(["kernels", "--json"])
    loaded = [c.name for c in chosen if not isinstance(c, _Listed)]
    assert loaded == ["kernels"]
    assert {c.name for c in chosen} == set(BUILTIN_COMMANDS)  # argparse still knows every built-in name
    listing = commands_for(["--help", "record"])  # the top-level help first: everything listed, plugins loaded
    assert "serve" in {c.name for c in listing} and not any(
        isinstance(c, _Listed) for c in listing if c.name == "serve")
    assert main(["--help", "record"]) == 0
    out = capsys.readouterr().out
    assert "serve" in out and "run a kernel on the simulated NeuronCore" in out


_HEAVY = ("numpy", "pyarrow", "duckdb", "plotly", "dash")


def _heavy_modules_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(sorted(m for m in {_HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1].replace("'", '"'))


@pytest.mark.parametrize(("argv", "allowed"), [
    (["--help"], ()), (["--version"], ()), (["serve", "--help"], ()), (["kernels"], ("numpy",)),
    (["record", "--help"], ()), (["info", "--help"], ("numpy", "pyarrow")),
])
def test_commands_start_without_unneeded_libraries(argv, allowed):
    """The command line imports what the command it runs needs (``trnprof --help`` in ~0.05 s, not ~0.37 s;
    benchmarks/bench_cli_startup.py)."""
    code = ("import contextlib, io\nfrom profiler.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0")
    assert set(_heavy_modules_after(code)) <= set(allowed)


def test_packages_load_their_data_modules_on_first_use():
    assert _heavy_modules_after("import profiler, tracer, tracer.errors, profiler.errors") == []
    assert "pyarrow" in _heavy_modules_after("import tracer\ntracer.TraceReader")
    assert "duckdb" in _heavy_modules_after("import profiler\nassert callable(profiler.open)")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import profiler

        profiler.nothing  # noqa: B018


def test_search_lists_matching_events_in_start_order(small_trace, capsys):
    """Text, a whole field and a regular expression find what Trace.search finds, in start order, with the time
    since the trace start; a bad regular expression is one line and exit code 2."""
    import profiler

    with profiler.open(small_trace) as t:
        want = t.search("/^matmul$/", limit=1_000_000).to_pylist()
        origin = t.time_range[0]
    assert want
    assert main(["search", str(small_trace), "/^matmul$/", "--limit", "0", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["table_name"], r["id"]) for r in got] == [(r["table_name"], r["id"]) for r in want]
    assert all(r["since_start_ns"] == r["start_ts"] - origin and r["duration_ns"] == r["end_ts"] - r["start_ts"]
               for r in got)
    assert main(["search", str(small_trace), "MATMUL", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 matching event(s) (the first 3; --limit 0 lists all)" in out and "MATMUL" in out
    assert main(["search", str(small_trace), "/(/"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid regular expression /(/" in err
