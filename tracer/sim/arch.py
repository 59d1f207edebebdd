"""Architecture presets and the cost model of the simulated NeuronCore.

This module owns every constant the simulator's timing depends on.  Each field of :class:`CostModel` is one
documented hardware fact (see ``docs/cost-model.md`` for the source of each); the two presets are ``trn1``
(NeuronCore-v2) and ``trn2`` (NeuronCore-v3).  Any constant can be overridden by name (``--set NAME=VALUE``) to
ask "what if"; an unknown name or a bad value raises :class:`~tracer.errors.ConfigError` listing the valid names.
Constants are never tuned to make a kernel hit a time.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tracer.errors import ConfigError


@dataclass(frozen=True)
class CostModel:
    """Hardware constants of one NeuronCore; every field can be overridden with ``--set NAME=VALUE``."""

    arch: str
    neuroncore_version: str
    instance_type: str
    # -- clocks (GHz) --------------------------------------------------------------------------------
    pe_clock_ghz: float
    dve_clock_ghz: float
    act_clock_ghz: float
    pool_clock_ghz: float
    neuroncore_clock_ghz: float
    # -- geometry ------------------------------------------------------------------------------------
    partitions: int = 128
    pe_rows: int = 128
    pe_cols: int = 128
    sbuf_partition_bytes: int = 192 * 1024
    psum_partition_bytes: int = 16 * 1024
    psum_banks: int = 8
    vector_channels: int = 128
    scalar_channels: int = 128
    gpsimd_channels: int = 128
    num_physical_cores: int = 2
    # -- Tensor engine -------------------------------------------------------------------------------
    mm_min_cycles: int = 64
    mm_max_moving: int = 512
    mm_fp32_factor: float = 4.0
    ldweights_speedup: float = 4.0
    pe_double_row: bool = False
    pe_double_row_speedup: float = 2.0
    fp8_flops_factor: float = 1.0
    throttle_enabled: bool = False
    throttle_start_fraction: float = 0.5
    throttle_ramp_ns: int = 3000
    throttle_window_ns: int = 3000
    throttle_reset_utilization: float = 0.5
    # -- Vector / Scalar / GpSimd ----------------------------------------------------------------------
    min_instruction_cycles: int = 64
    access_overhead_cycles: int = 60
    dve_dependent_overhead_cycles: int = 100
    dve_perf_mode_max: int = 1
    affine_select_overhead_cycles: int = 150
    bn_aggr_cycles_per_triple: int = 13
    #: NeuronCore-v2: Vector and GpSimd cannot access SBUF at the same time, Vector and Scalar not PSUM.
    access_conflicts: bool = False
    # -- DMA -------------------------------------------------------------------------------------------
    dma_queues: int = 16
    dma_bandwidth_gbps: float = 272.0
    hbm_bandwidth_gbps: float = 410.0
    dma_start_latency_ns: int = 1300
    dma_packet_bytes: int = 4096
    dma_near_peak_bytes: int = 2048
    dma_near_peak_efficiency: float = 0.9
    dma_saturation_bytes: int = 4096
    dma_transpose_hbm_efficiency: float = 0.9
    dma_transpose_sbuf_efficiency: float = 0.5
    # -- clock conversion --------------------------------------------------------------------------------
    ticks_per_nanosec: int = 1
    #: Names of fields given by the user (``--set``), for the record.
    overridden: tuple[str, ...] = field(default=(), compare=False)

    # -- derived quantities ------------------------------------------------------------------------------
    @property
    def dma_queue_bytes_per_ns(self) -> float:
        """Bandwidth of one DMA queue: the core's DMA bandwidth shared equally by its queues (B/ns)."""
        return self.dma_bandwidth_gbps / self.dma_queues

    @property
    def dma_overhead_bytes(self) -> float:
        """Per-descriptor overhead b0 (bytes) of the efficiency curve, solved from the two documented anchors."""
        # eff(b) = min(1, c * b / (b + b0)) with eff(saturation) = 1 and eff(near_peak) = near_peak_efficiency:
        # (b1 / (b1 + b0)) / (b2 / (b2 + b0)) = e  =>  b0 = b1 * b2 * (1 - e) / (e * b2 - b1)
        b1, b2, e = self.dma_near_peak_bytes, self.dma_saturation_bytes, self.dma_near_peak_efficiency
        return b1 * b2 * (1 - e) / (e * b2 - b1)

    def dma_efficiency(self, chunk_bytes: int) -> float:
        """Fraction of a queue's peak rate reached with ``chunk_bytes`` contiguous bytes per partition row."""
        if chunk_bytes >= self.dma_saturation_bytes:
            return 1.0
        b0 = self.dma_overhead_bytes
        scale = (self.dma_saturation_bytes + b0) / self.dma_saturation_bytes
        return min(1.0, scale * chunk_bytes / (chunk_bytes + b0))

    def dma_packet_ns(self, packet_bytes: int, chunk_bytes: int, factor: float = 1.0) -> int:
        """Duration (ns, rounded up) of one packet on one queue; ``factor`` scales the rate (a DMA transpose's
        :meth:`dma_transpose_factor`)."""
        rate = self.dma_queue_bytes_per_ns * self.dma_efficiency(chunk_bytes) * factor
        return max(1, math.ceil(packet_bytes / rate))

    def dma_transpose_factor(self, src_mem: str) -> float:
        """Share of the DMA rate a transpose keeps: ``dma_transpose_hbm_efficiency`` from HBM,
        ``dma_transpose_sbuf_efficiency`` from SBUF."""
        return self.dma_transpose_hbm_efficiency if src_mem == "HBM" else self.dma_transpose_sbuf_efficiency

    @staticmethod
    def cycles_to_ns(cycles: float, clock_ghz: float) -> int:
        """Cycles at ``clock_ghz`` as whole nanoseconds, rounded up (so no rate ever exceeds its peak)."""
        return max(1, math.ceil(cycles / clock_ghz - 1e-9))

    @property
    def pe_peak_flops(self) -> float:
        """BF16 peak of the PE array (FLOP/s): rows * cols * 2 * clock."""
        return self.pe_rows * self.pe_cols * 2 * self.pe_clock_ghz * 1e9

    def to_json(self) -> str:
        """Every constant, as a JSON object (stored in Metadata.cost_model)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "overridden"}
        data["overridden"] = list(self.overridden)
        data["derived"] = {
            "dma_queue_bytes_per_ns": self.dma_queue_bytes_per_ns,
            "dma_overhead_bytes": round(self.dma_overhead_bytes, 3),
            "pe_peak_flops": self.pe_peak_flops,
        }
        return json.dumps(data, sort_keys=True)


_TRN1 = CostModel(
    arch="trn1", neuroncore_version="NeuronCore-v2", instance_type="trn1.2xlarge",
    pe_clock_ghz=2.8, dve_clock_ghz=1.12, act_clock_ghz=1.4, pool_clock_ghz=1.4, neuroncore_clock_ghz=1.4,
    sbuf_partition_bytes=192 * 1024, num_physical_cores=2,
    dma_bandwidth_gbps=16 * 17.0, hbm_bandwidth_gbps=410.0,
    throttle_enabled=False, dve_perf_mode_max=1, access_conflicts=True,
)
_TRN2 = CostModel(
    arch="trn2", neuroncore_version="NeuronCore-v3", instance_type="trn2.48xlarge",
    pe_clock_ghz=2.4, dve_clock_ghz=0.96, act_clock_ghz=1.2, pool_clock_ghz=1.2, neuroncore_clock_ghz=1.2,
    sbuf_partition_bytes=224 * 1024, num_physical_cores=8,
    dma_bandwidth_gbps=16 * 23.0, hbm_bandwidth_gbps=725.0,
    throttle_enabled=True, dve_perf_mode_max=4, pe_double_row=True, fp8_flops_factor=0.5,
)
PRESETS: Mapping[str, CostModel] = {"trn1": _TRN1, "trn2": _TRN2}

_FIXED = {"arch", "neuroncore_version", "instance_type", "overridden"}
#: Constants that only describe the hardware in the trace's Metadata (Neuron Explorer's fields) and that no cost
#: rule reads: ``--set`` refuses them, saying what sets the speed instead (setting one changed nothing but the
#: Metadata, which then misdescribed the run).
_DESCRIPTIVE = {
    "vector_channels": "the Vector engine's speed comes from dve_clock_ghz and dve_perf_mode_max",
    "scalar_channels": "the Scalar engine's speed comes from act_clock_ghz",
    "gpsimd_channels": "the GpSimd engine's speed comes from pool_clock_ghz",
    "num_physical_cores": "a recording simulates one NeuronCore",
    "ticks_per_nanosec": "simulated time is kept in whole nanoseconds",
}
#: The largest value ``--set`` takes (a cycle count or a size beyond it would overflow int64 nanoseconds).
_MOST = 10 ** 12
_POSITIVE_EXEMPT = {"dve_dependent_overhead_cycles", "access_overhead_cycles", "affine_select_overhead_cycles",
                    "dma_start_latency_ns"}


def overridable_names() -> list[str]:
    """Names accepted by ``--set``."""
    return sorted(f.name for f in fields(CostModel) if f.name not in _FIXED and f.name not in _DESCRIPTIVE)


def _parse_value(name: str, kind: Any, text: str) -> Any:
    text = text.strip()
    if kind is bool or kind == "bool":
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"--set {name}={text}: expected true or false")
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--set {name}={text}: expected a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"--set {name}={text}: expected a finite number")
    if kind is int or kind == "int":
        if value != int(value):
            raise ConfigError(f"--set {name}={text}: expected a whole number")
        value = int(value)
    if value < 0 or (value == 0 and name not in _POSITIVE_EXEMPT):
        raise ConfigError(f"--set {name}={text}: must be " + ("0 or more" if name in _POSITIVE_EXEMPT else "positive"))
    if value > _MOST:
        raise ConfigError(f"--set {name}={text}: must be at most {_MOST:.0e} (times are int64 nanoseconds)")
    return value


def cost_model(arch: str = "trn2", overrides: Mapping[str, Any] | None = None) -> CostModel:
    """The preset for ``arch`` with ``overrides`` (name -> value or string) applied and validated.

    Raises:
        ConfigError: unknown architecture, unknown constant (the message lists the valid names) or bad value.
    """
    base = PRESETS.get(arch) if isinstance(arch, str) else None
    if base is None:
        raise ConfigError(f"unknown architecture {str(arch)[:40]!r}; choose one of {', '.join(PRESETS)}")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"overrides must be a mapping of cost-model constant -> value (or None), not "
                          f"{str(overrides)[:60]!r}")
    if not overrides:
        return base
    types = {f.name: f.type for f in fields(CostModel)}
    valid = overridable_names()
    changes: dict[str, Any] = {}
    for name, raw in overrides.items():
        if name in _DESCRIPTIVE:
            raise ConfigError(f"--set {name}: it only describes the hardware in the trace's Metadata and no cost "
                              f"rule reads it ({_DESCRIPTIVE[name]}; docs/cost-model.md)")
        if name not in valid:
            raise ConfigError(f"unknown cost-model constant {name!r}; valid names: {', '.join(valid)}")
        kind = types[name]
        changes[name] = _parse_value(name, kind, raw) if isinstance(raw, str) else _parse_value(name, kind, str(raw))
    model = dataclasses.replace(base, overridden=tuple(sorted(changes)), **changes)
    _validate(model)
    return model


def _validate(m: CostModel) -> None:
    if not 0 < m.dma_near_peak_bytes < m.dma_saturation_bytes:
        raise ConfigError("dma_near_peak_bytes must be positive and below dma_saturation_bytes")
    if not m.dma_near_peak_bytes / m.dma_saturation_bytes < m.dma_near_peak_efficiency < 1:
        raise ConfigError("dma_near_peak_efficiency must lie between near_peak/saturation bytes and 1")
    for name in ("dma_transpose_hbm_efficiency", "dma_transpose_sbuf_efficiency"):
        if not 0 < getattr(m, name) <= 1:
            raise ConfigError(f"{name} must be in (0, 1]")
    if m.pe_double_row_speedup < 1:
        raise ConfigError("pe_double_row_speedup must be at least 1")
    if not 0 < m.throttle_start_fraction <= 1:
        raise ConfigError("throttle_start_fraction must be in (0, 1]")
    if not 0 <= m.throttle_reset_utilization <= 1:
        raise ConfigError("throttle_reset_utilization must be in [0, 1]")
    if m.partitions > 128 or m.pe_rows > m.partitions:
        raise ConfigError("partitions must be at most 128 and pe_rows at most partitions")
    if m.psum_partition_bytes % m.psum_banks:
        raise ConfigError("psum_partition_bytes must be a multiple of psum_banks")
    if m.dve_perf_mode_max not in (1, 2, 4):
        raise ConfigError("dve_perf_mode_max must be 1, 2 or 4")


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; ConfigError on an item without ``=``."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE; valid names: {', '.join(overridable_names())}")
        out[name.strip()] = value
    return out
