"""The CLI skeleton: subcommands listed, --help everywhere, one-line errors without tracebacks."""

import json

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
