"""A recording process for the crash-safety test: appends deterministic rows forever until killed."""

import sys

from tests.conftest import instruction_columns
from tracer import TraceWriter

path = sys.argv[1]
chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 97
with TraceWriter(path, batch_rows=256, flush_interval_s=0.02, metadata={"profile_name": "crash-test"}) as w:
    first = 0
    while True:
        w.append("Instruction", instruction_columns(chunk, first))
        w.append_rows("SemaphoreUpdate", [{"timestamp": first, "id": "S[0]", "value": first % 100}])
        first += chunk
