"""``trnprof info``: what a trace holds (tables, rows, metadata): a trace directory read directly, whether its
recording completed included; a database or an importable profile (Neuron Explorer Parquet, neuron-profile JSON,
Chrome trace JSON) through its database, with where it was ingested from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tracer.reader import TraceReader


def describe_trace(path: str) -> dict[str, Any]:
    """Tables with their row counts and the Metadata row of the trace at ``path``: a trace directory (read
    directly), else a database or importable file or directory (a Neuron Explorer Parquet export), opened as
    ``profiler.open`` does, ingesting it on first use."""
    if Path(path).is_dir() and (not any(Path(path).glob("*.parquet")) or any(Path(path).glob("*.arrows"))):
        reader = TraceReader(path)
        return {
            "path": str(reader.path),
            "recording_complete": reader.recording_complete,
            "tables": {name: reader.num_rows(name) for name in reader.table_names()},
            "metadata": {k: v for k, v in reader.metadata.items() if v is not None},
        }
    # (imported here: `trnprof info DIR` and `--help` need no database library)
    from profiler import db_schema as dbs
    from profiler.cli._analysis import open_trace
    from profiler.db.sqlutil import quote
    from tracer import schema as ts

    with open_trace(path) as trace:
        cursor = trace._cursor()
        present = {row[0] for row in cursor.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
        tables = {}
        for spec in ts.TABLES:
            stored = dbs.SLICE_TABLE if spec.name == ts.SPAN.name else spec.name
            if stored in present:
                count = cursor.execute(f"SELECT count(*) FROM {quote(stored)}").fetchone()
                if count and count[0]:
                    tables[spec.name] = int(count[0])
        # the tables an import kept as they were (Neuron Explorer's Summary, ActiveTime, ...): SQL reads them too
        own = {dbs.SLICE_TABLE, dbs.INFO_TABLE, dbs.TRACK_TABLE, dbs.LOD_TABLE, dbs.COUNTER_LOD_TABLE}
        for name in sorted(present - own - {spec.name for spec in ts.TABLES}, key=str.lower):
            count = cursor.execute(f"SELECT count(*) FROM {quote(name)}").fetchone()
            tables[name] = int(count[0]) if count else 0
        overview = trace.overview()
        return {
            "path": str(path),
            "database": str(trace.db_path),
            "source_format": overview["source_format"],
            "ingested_at": overview["ingested_at"],
            "duration_ns": overview["duration_ns"],
            "tables": tables,
            "metadata": {k: v for k, v in trace.metadata.items() if v is not None},
        }


class InfoCommand:
    """Show the tables, row counts and metadata of a trace."""

    name = "info"
    help = "show what a trace holds: tables, rows, metadata"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", help="trace directory, trnprof database or importable profile")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def run(self, args: argparse.Namespace) -> int:
        info = describe_trace(args.trace)
        if args.json:
            print(json.dumps(info, indent=2, sort_keys=True, default=str))
            return 0
        print(f"trace: {info['path']}")
        if "database" in info:
            print(f"database: {info['database']} ({info.get('source_format') or 'unknown format'}, "
                  f"ingested {info.get('ingested_at') or 'at an unknown time'})")
            print(f"duration: {info['duration_ns']:,} ns")
        elif not info["recording_complete"]:
            print("recording: INCOMPLETE (the writer did not finish; complete batches are shown)")
        print("tables:")
        for name, rows in info["tables"].items():
            print(f"  {name:<16} {rows:>14,} rows")
        print("metadata:" if info["metadata"] else "metadata: none")
        for key, value in info["metadata"].items():
            print(f"  {key:<32} {value}")
        return 0


COMMAND = InfoCommand()
