"""What the cost model assumes about the machines: throughputs, link speeds, latency.

Why a separate module: predictions are only as good as these numbers, so they are
named, labelled (preset from datasheets vs measured here) and overridable from the
CLI. Presets use public datasheet peaks scaled by ``ACHIEVED_FRACTION`` (an
assumption: well-tuned CNN training reaches roughly half of peak); ``local``
is this machine, measured and cached by the driver (bench/calibration.py
``resolve_hardware``) and handed in as a Hardware: the engine measures nothing
and writes no file.

Units: FLOP/s for throughputs, bit/s for links (the cost model divides by 8),
seconds for latency. The number of PS tasks is a run parameter, not hardware.
"""
import json
import os
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional

from bench.errors import UserError

ACHIEVED_FRACTION = 0.5
DEFAULT_PRESET = "v100-10gbe"


@dataclass(frozen=True)
class Hardware:
    """Achieved throughputs of one worker and one PS task, and their network links."""
    name: str
    worker_conv_flops: float   # FLOP/s achieved on convolutions (and other non-matmul layers)
    worker_dense_flops: float  # FLOP/s achieved on Dense (matmul) layers
    ps_flops: float            # FLOP/s of one PS task (FC head under RALP, gradient aggregation)
    worker_bandwidth: float    # bit/s of each worker's link, per direction (full duplex)
    ps_bandwidth: float        # bit/s of each PS task's link, per direction
    latency_s: float           # one-way message latency
    is_preset: bool = True
    description: str = ""
    pass_s: Optional[float] = None  # seconds per element of one memory-bound pass (m = a*m + g);
                                    # None: PASS_FLOPS conv FLOPs' worth (ralp.cost_model)

    def pass_seconds(self, elements: float, passes: float = 1.0) -> float:
        """Time for ``passes`` elementwise passes over ``elements`` floats on one host."""
        from ralp.cost_model import PASS_FLOPS

        per = self.pass_s if self.pass_s else PASS_FLOPS / self.worker_conv_flops
        return elements * passes * per


def _preset(name, peak_flops, link_bits, latency_s, description):
    achieved = peak_flops * ACHIEVED_FRACTION
    return Hardware(name, achieved, achieved, achieved, link_bits, link_bits, latency_s, True,
                    f"preset: {description}; achieved = {ACHIEVED_FRACTION:.0%} of datasheet peak (assumption); "
                    "the PS host has the same accelerator")


PRESETS = {
    "v100-10gbe": _preset("v100-10gbe", 15.7e12, 10e9, 50e-6,
                          "NVIDIA V100 SXM2 (15.7 TFLOP/s fp32) per worker, 10 Gb/s Ethernet"),
    "a100-ib100": _preset("a100-ib100", 156e12, 100e9, 10e-6,
                          "NVIDIA A100 (156 TFLOP/s TF32 dense) per worker, 100 Gb/s InfiniBand HDR100"),
    "h100-400g": _preset("h100-400g", 494.7e12, 400e9, 5e-6,
                         "NVIDIA H100 SXM (494.7 TFLOP/s TF32 dense) per worker, 400 Gb/s NDR InfiniBand"),
}
PRESET_NAMES = list(PRESETS) + ["local"]

_NUMBER = r"(-?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"
_BANDWIDTH_RE = re.compile(r"^\s*" + _NUMBER + r"\s*([kmgt]?)(bit/s|bits/s|bits|bit|bps|b/s|b)?\s*$")
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_LATENCY_RE = re.compile(r"^\s*" + _NUMBER + r"\s*(ns|us|µs|ms|s)?\s*$")
_LATENCY_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}


def parse_bandwidth(text) -> float:
    """'10gbit', '100mbit', '1.5Gbit', '400gbps', '1e9' -> bits per second (decimal prefixes)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _BANDWIDTH_RE.match(str(text).lower())
        if not match:
            raise UserError(f"bandwidth {text!r} not understood; "
                            "use e.g. 10gbit, 100mbit, 1.5Gbit, 400gbps or 1e9 (bit/s)")
        value = float(match.group(1)) * _SCALE[match.group(2)]
    if not value > 0:
        raise UserError(f"bandwidth must be positive, got {text!r}")
    return value


def parse_latency(text) -> float:
    """'0.1ms', '50us', '1e-4' (seconds) -> seconds; zero is allowed."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _LATENCY_RE.match(str(text).lower())
        if not match:
            raise UserError(f"latency {text!r} not understood; use e.g. 0.1ms, 50us or 1e-4 (seconds)")
        value = float(match.group(1)) * _LATENCY_SCALE[match.group(2)]
    if value < 0:
        raise UserError(f"latency must not be negative, got {text!r}")
    return value


def hardware_from_measurement(data: dict, description: str) -> Hardware:
    """A 'local' Hardware from measured figures (bench/calibration.py: conv and matmul FLOP/s,
    and an optional ``pass_s``)."""
    return Hardware(
        name="local", worker_conv_flops=data["worker_conv_flops"], worker_dense_flops=data["worker_dense_flops"],
        ps_flops=data["worker_dense_flops"], worker_bandwidth=10e9, ps_bandwidth=10e9, latency_s=50e-6,
        is_preset=False, description=description + "; link defaults to 10 Gb/s: set it to what the "
        "(emulated) network provides", pass_s=data.get("pass_s"))


def _from_file(path: Path) -> Hardware:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read hardware file {path}: {exc}") from None
    names = {f.name for f in fields(Hardware)}
    unknown = set(data) - names
    if unknown:
        raise UserError(f"hardware file {path}: unknown keys {sorted(unknown)}; allowed: {sorted(names)}")
    required = names - {"name", "is_preset", "description", "ps_flops", "ps_bandwidth", "latency_s",
                        "worker_dense_flops", "pass_s"}
    missing = required - set(data)
    if missing:
        raise UserError(f"hardware file {path}: missing {sorted(missing)}")
    data.setdefault("name", path.stem)
    data.setdefault("worker_dense_flops", data["worker_conv_flops"])
    data.setdefault("ps_flops", data["worker_dense_flops"])
    data["worker_bandwidth"] = parse_bandwidth(data["worker_bandwidth"])
    data["ps_bandwidth"] = parse_bandwidth(data.get("ps_bandwidth", data["worker_bandwidth"]))
    data["latency_s"] = parse_latency(data.get("latency_s", 0.0))
    for key in ("worker_conv_flops", "worker_dense_flops", "ps_flops"):
        if not float(data[key]) > 0:
            raise UserError(f"hardware file {path}: {key} must be positive")
        data[key] = float(data[key])
    data.setdefault("is_preset", False)
    data.setdefault("description", f"from {path}")
    return Hardware(**data)


def load_hardware(spec: Optional[str] = None, bandwidth=None, ps_bandwidth=None, latency=None) -> Hardware:
    """A Hardware, a preset name or a JSON file; link/latency overrides apply on top.

    ``bandwidth`` sets every link (workers and PS) unless ``ps_bandwidth`` is also given.
    'local' is refused: only the driver measures this machine (bench/calibration.py).
    """
    spec = spec or DEFAULT_PRESET
    if isinstance(spec, Hardware):
        hardware = spec
    elif spec in PRESETS:
        hardware = PRESETS[spec]
    elif spec == "local":
        raise UserError("hardware 'local' is measured by the driver, not the engine: pass "
                        "bench.calibration.resolve_hardware('local') (or ralp-bench analyze --hardware local)")
    elif spec.endswith(".json") or os.path.sep in spec:
        hardware = _from_file(Path(spec))
    else:
        raise UserError(f"unknown hardware {spec!r}; presets: {', '.join(PRESET_NAMES)} (or a JSON file path)")
    changes = {}
    if bandwidth is not None:
        changes["worker_bandwidth"] = changes["ps_bandwidth"] = parse_bandwidth(bandwidth)
    if ps_bandwidth is not None:
        changes["ps_bandwidth"] = parse_bandwidth(ps_bandwidth)
    if latency is not None:
        changes["latency_s"] = parse_latency(latency)
    return replace(hardware, **changes) if changes else hardware


def format_bandwidth(bits_per_s: float, flag: bool = False) -> str:
    """1e9 -> '1 Gbit/s' for tables and legends; with ``flag``, '1gbit', the form
    ``parse_bandwidth`` reads back (for commands people copy)."""
    for unit, scale in (("Tbit", 1e12), ("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= scale:
            value = bits_per_s / scale
            return f"{value:g}{unit.lower()}" if flag else f"{value:.3g} {unit}/s"
    return f"{bits_per_s:g}bit" if flag else f"{bits_per_s:.3g} bit/s"
