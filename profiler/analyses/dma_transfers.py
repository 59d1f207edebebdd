"""DMA transfers: packets grouped into the transfers (descriptors) they belong to, and the instruction that
triggered each transfer.

A transfer is the set of ``DmaPacket`` rows sharing ``packet_aggregation_id`` (a packet without one is a transfer
of its own); it spans from its first packet's start to its last packet's end.  Its trigger is found, in order of
preference, from

1. ``Flow`` edges from an ``Instruction`` to one of its packets (``out_table = 'Instruction'``, ``in_table =
   'DmaPacket'``), when the trace records them;
2. trnprof's simulator convention: transfers are numbered in the order their ``DMA_TRIGGER`` instructions
   executed, so the k-th ``DMA_TRIGGER`` (by id) started transfer k — used only when the counts agree exactly.

Otherwise the trigger is unknown (``-1``) and the analyses say so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.inputs import DMA_PACKET, DMA_TRIGGER_OPCODE, FLOW, INSTRUCTION, Scope, column, fetch, q
from profiler.trace import Trace
from tracer import schema as ts

#: Column names of the transfer table (internal to the analyses).
AGG = "agg"
FIRST_START = "first_start"
LAST_END = "last_end"
LAST_ID = "last_id"
LAST_TRACK = "last_track"
LAST_QUEUE = "last_queue"
NBYTES = "nbytes"
NPACKETS = "npackets"
VAR = "var"
TRIGGER = "trigger"


@dataclass(frozen=True)
class Transfers:
    """One row per DMA transfer, sorted by ``agg`` (the transfer id), with its trigger instruction (-1: unknown)."""

    table: pa.Table
    trigger: np.ndarray
    trigger_source: str          # "flow", "simulator" or "none"
    #: Whether every transfer of the scope's core is here (False: only those with a packet in the window, from
    #: ``transfers(..., window_only=True)``; every transfer starting in the window is among them).
    whole: bool = True

    def __len__(self) -> int:
        return self.table.num_rows

    def col(self, name: str, dtype: type = np.int64) -> np.ndarray:
        """A column as a numpy array."""
        return column(self.table, name, dtype)


def merged(a: Transfers, b: Transfers) -> Transfers:
    """The transfers of ``a`` and ``b`` (the same transfer in both is the same row), sorted by ``agg``."""
    table = pa.concat_tables([a.table, b.table.cast(a.table.schema)])
    agg = column(table, AGG)
    _, first = np.unique(agg, return_index=True)   # (sorted by agg, first occurrence)
    trigger = np.concatenate([a.trigger, b.trigger])[first]
    source = a.trigger_source if a.trigger_source != "none" else b.trigger_source
    return Transfers(table.take(pa.array(first)), trigger, source, whole=a.whole or b.whole)


def _has_trigger_flows(trace: Trace) -> bool:
    """Whether the Flow table has an edge from an instruction to a packet (the triggers can be read from it)."""
    found = fetch(trace, f"SELECT 1 FROM {FLOW} WHERE {q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}' AND "
                         f"{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}' LIMIT 1")
    return found.num_rows > 0


def agg_expr(alias: str = "") -> str:
    """SQL: the transfer id of a DmaPacket row; a packet without an aggregation id is a transfer of its own,
    keyed apart from real (non-negative) ids."""
    p = f"{alias}." if alias else ""
    return f"coalesce({p}{q(rs.T_PACKET_AGGREGATION_ID)}, -1 - {p}{q(ts.ID)})"


def transfers(trace: Trace, scope: Scope | None = None, *, window_only: bool = False,
              triggered_by: np.ndarray | None = None) -> Transfers:
    """Every DMA transfer of the trace (on the scope's core), with first start, last end and trigger.

    The scope's window is not applied here: a transfer's trigger is found from the whole trace; callers filter.
    With ``window_only`` the transfers with a packet overlapping the window are enough (each still whole: every
    packet of it, and its trigger from every one of them), which spares grouping every packet of a long trace for
    a narrow window -- when the trace's Flow table names the triggers (the simulator's index pairing needs every
    transfer, so without flows every one is returned).  With ``triggered_by`` (instruction ids), likewise only the
    transfers a Flow edge from one of them reaches.
    """
    core = scope.core_sql() if scope is not None else "TRUE"
    narrow = ((window_only and scope is not None) or triggered_by is not None) and _has_trigger_flows(trace)
    if not narrow:
        cand = DMA_PACKET
    elif triggered_by is not None:
        cand = (f"{DMA_PACKET} SEMI JOIN (SELECT DISTINCT {agg_expr('p')} AS c FROM {FLOW} f JOIN {DMA_PACKET} p "
                f"ON p.{q(ts.ID)} = f.{q(ts.IN_ID)} WHERE f.{q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}' AND "
                f"f.{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}' AND f.{q(ts.OUT_ID)} IN "
                f"(SELECT unnest($trig))) cand ON {agg_expr(DMA_PACKET)} = cand.c")
    else:
        cand = (f"{DMA_PACKET} SEMI JOIN (SELECT DISTINCT {agg_expr()} AS c FROM {DMA_PACKET} WHERE {core} AND "
                f"{q(ts.START_TS)} < {int(scope.end_ns)} AND ({q(ts.END_TS)} > {int(scope.start_ns)} OR "
                f"{q(ts.START_TS)} >= {int(scope.start_ns)})) cand ON {agg_expr(DMA_PACKET)} = cand.c")
    table = fetch(trace, f"""
        SELECT {agg_expr()} AS {AGG},
               min({q(ts.START_TS)}) AS {FIRST_START},
               max({q(ts.END_TS)}) AS {LAST_END},
               arg_max({q(ts.ID)}, ({q(ts.END_TS)}, {q(ts.ID)})) AS {LAST_ID},
               arg_max({q(rs.TRACK_ID)}, ({q(ts.END_TS)}, {q(ts.ID)})) AS {LAST_TRACK},
               arg_max({q(ts.QUEUE_NAME)}, ({q(ts.END_TS)}, {q(ts.ID)})) AS {LAST_QUEUE},
               sum({q(ts.TRANSFER_BYTES)})::BIGINT AS {NBYTES},
               count(*) AS {NPACKETS},
               any_value({q(ts.VARIABLE)}) AS {VAR}
        FROM {cand} WHERE {core} GROUP BY 1 ORDER BY 1""",
                  params={"trig": np.asarray(triggered_by, np.int64).tolist()} if "$trig" in cand else None)
    agg = column(table, AGG)
    trigger = np.full(len(agg), -1, dtype=np.int64)
    source = "none"
    only = f"AND {agg_expr('p')} IN (SELECT unnest($aggs))" if narrow else ""
    flow = fetch(trace, f"""
        SELECT {agg_expr('p')} AS {AGG}, min(f.{q(ts.OUT_ID)}) AS {TRIGGER}
        FROM {FLOW} f JOIN {DMA_PACKET} p ON p.{q(ts.ID)} = f.{q(ts.IN_ID)}
        WHERE f.{q(ts.IN_TABLE)} = '{ts.DMA_PACKET.name}' AND f.{q(ts.OUT_TABLE)} = '{ts.INSTRUCTION.name}'
          AND {scope.core_sql('p') if scope is not None else 'TRUE'} {only}
        GROUP BY 1""", params={"aggs": agg.tolist()} if narrow else None)
    if flow.num_rows or narrow:   # (narrow: the Flow table names triggers, none of these transfers' maybe)
        pos = np.searchsorted(agg, column(flow, AGG))
        trigger[pos] = column(flow, TRIGGER)
        source = "flow"
    else:
        triggers = fetch(trace, f"SELECT {q(ts.ID)} FROM {INSTRUCTION} WHERE {q(ts.OPCODE)} = "
                                f"'{DMA_TRIGGER_OPCODE}' AND {core} ORDER BY {q(ts.ID)}")
        if triggers.num_rows and triggers.num_rows == len(agg) and bool((agg >= 0).all()):
            trigger = column(triggers, ts.ID)
            source = "simulator"
    return Transfers(table, trigger, source, whole=not narrow)
