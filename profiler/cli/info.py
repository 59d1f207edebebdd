"""``trnprof info``: what a trace directory holds (tables, rows, metadata, whether the recording completed)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tracer.reader import TraceReader


def describe_trace(path: str) -> dict[str, Any]:
    """Tables with their row counts and the Metadata row of the trace at ``path``."""
    reader = TraceReader(path)
    return {
        "path": str(reader.path),
        "recording_complete": reader.recording_complete,
        "tables": {name: reader.num_rows(name) for name in reader.table_names()},
        "metadata": {k: v for k, v in reader.metadata.items() if v is not None},
    }


class InfoCommand:
    """Show the tables, row counts and metadata of a trace directory."""

    name = "info"
    help = "show what a trace directory holds"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", help="trace directory")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def run(self, args: argparse.Namespace) -> int:
        info = describe_trace(args.trace)
        if args.json:
            print(json.dumps(info, indent=2, sort_keys=True, default=str))
            return 0
        print(f"trace: {info['path']}")
        if not info["recording_complete"]:
            print("recording: INCOMPLETE (the writer did not finish; complete batches are shown)")
        print("tables:")
        for name, rows in info["tables"].items():
            print(f"  {name:<16} {rows:>14,} rows")
        print("metadata:")
        for key, value in info["metadata"].items():
            print(f"  {key:<32} {value}")
        return 0


COMMAND = InfoCommand()
