"""``trnprof kernels``: the shipped kernels and their parameters."""

from __future__ import annotations

import argparse
import json

from tracer.kernels import all_kernels


class KernelsCommand:
    """List the kernels `trnprof record` can run, with their parameters and defaults.

    Your own kernel runs with `trnprof record path/to/file.py:function` (see docs/kernels.md).
    """

    name = "kernels"
    help = "list the shipped kernels and their parameters"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def run(self, args: argparse.Namespace) -> int:
        specs = all_kernels()
        if args.json:
            print(json.dumps([{"name": s.name, "summary": s.summary, "has_reference": s.reference is not None,
                               "params": {p.name: {"default": p.default, "type": p.type.__name__}
                                          for p in s.params}} for s in specs], indent=2))
            return 0
        for s in specs:
            print(f"{s.name}: {s.summary}")
            # (booleans as -p takes them: causal=false)
            params = "  ".join(f"{p.name}={str(p.default).lower() if isinstance(p.default, bool) else p.default}"
                               for p in s.params)
            print(f"    parameters: {params or '(none)'}")
        from tracer.sim.dtypes import DTYPES  # (numpy: only when the list is printed)

        print(f"\ndtypes: {', '.join(DTYPES)}")
        print("record one with: trnprof record KERNEL -p KEY=VALUE ...  (or path/to/file.py:function)")
        return 0


COMMAND = KernelsCommand()
