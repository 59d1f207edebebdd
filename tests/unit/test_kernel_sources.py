"""What a recording keeps of its kernel's source files (``tracer.sim.kernel_sources``)."""

from __future__ import annotations

from tracer import schema as ts
from tracer.sim import kernel_sources as ks


def test_names_agree_with_the_schema():
    # the simulating process spells them out (it does not load pyarrow); the schema owns them
    assert ts.SOURCE_FILE.name == ks.TABLE
    rows = ks.source_rows([__file__])
    assert set(rows[0]) == set(ts.SOURCE_FILE.names)
    assert ks.FILE == ts.SOURCE_FILE_NAME and rows[0][ks.FILE] == "test_kernel_sources.py"


def test_rows_skip_what_cannot_or_need_not_be_kept(tmp_path, monkeypatch):
    a = tmp_path / "a.py"
    a.write_bytes(b"x = 1\n# caf\xc3\xa9 \xff\n")
    other = tmp_path / "sub"
    other.mkdir()
    (other / "a.py").write_text("y = 2\n")
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * (ks.MAX_FILE_BYTES + 1))
    rows = ks.source_rows([str(a), str(other / "a.py"), str(big), "<string>", str(tmp_path / "gone.py"),
                           str(tmp_path / "b.py")], skip=["b.py"])
    # one row per base name (the first), undecodable bytes replaced, too big / pseudo / missing / skipped left out
    assert rows == [{"file": "a.py", "text": "x = 1\n# café \ufffd\n", "size_bytes": 16}]
    monkeypatch.setattr(ks, "MAX_FILES", 2)
    many = []
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(str(i))
        many.append(str(tmp_path / f"m{i}.py"))
    assert [r["file"] for r in ks.source_rows(many, skip=["k.py"])] == ["m0.py"]  # the skipped name counts


def test_kernel_file_of_functions():
    assert ks.kernel_file(test_kernel_file_of_functions) == __file__
    assert ks.kernel_file(len) is None
    ns: dict = {}
    exec("def f(nc): pass", ns)
    assert ks.kernel_file(ns["f"]) is None
    codes = [test_kernel_file_of_functions.__code__, ks.source_rows.__code__, test_names_agree_with_the_schema.__code__]
    assert ks.location_files(codes) == sorted({__file__, ks.__file__})
