"""Regenerate the table reference in docs/trace-format.md from tracer/schema.py.

    python docs/gen_trace_format.py          # rewrite the generated section in place
    python docs/gen_trace_format.py --check  # exit 1 if the document is out of date (run by the tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

from tracer import schema

DOC = Path(__file__).with_name("trace-format.md")
BEGIN = "<!-- BEGIN GENERATED TABLES (docs/gen_trace_format.py) -->"
END = "<!-- END GENERATED TABLES -->"


def _type_name(col: schema.Column) -> str:
    return "string (dictionary)" if col.is_dictionary else str(col.type)


def tables_markdown() -> str:
    out: list[str] = []
    for spec in (*schema.TABLES, *schema.STORAGE_TABLES):
        origin = "Neuron Explorer table" if spec.neuron else "trnprof extension"
        if spec.kind == "storage":
            origin = f"storage of {', '.join(k for k, v in schema.STORED_AS.items() if spec.name in v)}"
        out.append(f"### `{spec.name}` — {spec.kind}, {origin}\n")
        out.append(f"{spec.doc}\n")
        out.append("| column | type | required | unit | meaning |")
        out.append("|---|---|---|---|---|")
        for c in spec.columns:
            out.append(f"| `{c.name}` | {_type_name(c)} | {'yes' if c.required else ''} | {c.unit} | {c.doc} |")
        out.append("")
    return "\n".join(out)


def render(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{tables_markdown()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = render(text)
    if "--check" in argv:
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
