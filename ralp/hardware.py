"""What the cost model assumes about the machines: throughputs, link speeds, latency.

Why a separate module: predictions are only as good as these numbers, so they are
named, labelled (preset from datasheets vs measured here) and overridable from the
CLI. Presets use public datasheet peaks scaled by ``ACHIEVED_FRACTION`` (an
assumption: well-tuned CNN training reaches roughly half of peak); ``local``
is this machine, measured and cached by the driver (bench/driver/calibration.py
``resolve_hardware``) and handed in as a Hardware: the engine measures nothing
and writes no file.

GPU presets carry their device's datasheet memory bandwidth, which prices memory-bound
passes (optimizer updates, gradient sums, codecs); the FLOP rate prices them only where
neither a measured ``pass_s`` nor a memory bandwidth is known. A host may hold several
devices (``gpus_per_host``) behind one NIC, linked to each other by NVLink or PCIe
(``intra_host_bandwidth``) and to their host by PCIe (``host_device_bandwidth``).

Units: FLOP/s for throughputs, bit/s for network links (the cost model divides by 8),
bytes/s for memory and the links inside a host (each per device and per direction),
seconds for latency. The number of PS tasks is a run parameter, not hardware.
"""
import json
import os
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional

from ralp.errors import UserError

ACHIEVED_FRACTION = 0.5
DEFAULT_PRESET = "v100-10gbe"


BYTES_PER_PASS = 12.0  # one elementwise pass over fp32 data reads two operands and writes one
# One elementwise pass over one element costs as long as this many conv FLOPs (memory-bound
# vs compute-bound work): 2.1 ns at 37.9 GFLOP/s on the 2-core VM where ralp/step_cost.py's
# CODEC_PASSES were measured; assumed to carry over to other hardware in proportion to its
# throughput (used only where a device's memory bandwidth is unknown).
PASS_FLOPS = 80.0
GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """Achieved throughputs of one worker and one PS task, and their links: the network's,
    shared by a host's ``gpus_per_host`` workers, and those inside a host."""
    name: str
    worker_conv_flops: float   # FLOP/s achieved on convolutions (and other non-matmul layers)
    worker_dense_flops: float  # FLOP/s achieved on Dense (matmul) layers
    ps_flops: float            # FLOP/s of one PS task (FC head under RALP, gradient aggregation)
    worker_bandwidth: float    # bit/s of each worker host's NIC, per direction (full duplex)
    ps_bandwidth: float        # bit/s of each PS task's link, per direction
    latency_s: float           # one-way message latency
    is_preset: bool = True
    description: str = ""
    pass_s: Optional[float] = None  # seconds per element of one memory-bound pass (m = a*m + g), measured;
                                    # None: from memory_bandwidth, else PASS_FLOPS conv FLOPs' worth
    gpus_per_host: int = 1     # workers sharing one host and its NIC (predict's default workers_per_host)
    memory_bandwidth: Optional[float] = None  # bytes/s of a worker's device memory (datasheet)
    host_device_bandwidth: Optional[float] = None  # bytes/s between a device and its host (PCIe), per direction
    intra_host_bandwidth: Optional[float] = None   # bytes/s from one device to the host's others (NVLink,
                                                   # PCIe peer), per direction; None: CPU workers (shared memory)
    ps_memory_bandwidth: Optional[float] = None    # bytes/s of the PS task's device; None: the workers' device

    def pass_seconds(self, elements: float, passes: float = 1.0, on_ps: bool = False) -> float:
        """Time for ``passes`` elementwise passes over ``elements`` floats on a worker's device (or,
        ``on_ps``, the PS task's): the measured ``pass_s``, else the device's memory bandwidth at
        ``BYTES_PER_PASS``, else ``PASS_FLOPS`` of the worker's conv throughput."""
        per = self.pass_s or self.memory_pass_s(on_ps) or PASS_FLOPS / self.worker_conv_flops
        return elements * passes * per

    def memory_pass_s(self, on_ps: bool = False) -> Optional[float]:
        """Seconds per element of one pass at the device's memory bandwidth; None where unknown."""
        bandwidth = (self.ps_memory_bandwidth or self.memory_bandwidth) if on_ps else self.memory_bandwidth
        return BYTES_PER_PASS / bandwidth if bandwidth else None

    def worker_link_Bps(self, workers_per_host: int = 1) -> float:
        """Bytes/s each of a host's ``workers_per_host`` workers gets to the network: its share of
        the NIC they all use at once, or its device's PCIe link where that is slower."""
        return min(self.worker_bandwidth / 8 / workers_per_host, self.host_device_bandwidth or float("inf"))

    def ps_link_Bps(self) -> float:
        """Bytes/s of a PS task's link; its device's PCIe link where that is slower."""
        return min(self.ps_bandwidth / 8, self.host_device_bandwidth or float("inf"))


def _preset(name, peak_flops, link_bits, latency_s, description, *, memory, pcie, nvlink=None, gpus=1):
    """A datasheet preset: ``peak_flops`` at ``ACHIEVED_FRACTION``; ``memory`` (device memory),
    ``pcie`` (device to host) and ``nvlink`` (device to device) in bytes/s per direction, as
    published (memory-bound passes are priced at the datasheet's memory bandwidth)."""
    achieved = peak_flops * ACHIEVED_FRACTION
    return Hardware(name, achieved, achieved, achieved, link_bits, link_bits, latency_s, True,
                    f"preset: {description}; achieved = {ACHIEVED_FRACTION:.0%} of datasheet peak (assumption); "
                    "memory-bound passes at the datasheet memory bandwidth; the PS host has the same accelerator",
                    gpus_per_host=gpus, memory_bandwidth=memory, host_device_bandwidth=pcie,
                    intra_host_bandwidth=nvlink)


# Datasheets (peak figures; NVLink's and PCIe's published totals count both directions, halved here):
# - P100 SXM2: NVIDIA Tesla P100 datasheet (2016): 10.6 TFLOP/s fp32, HBM2 732 GB/s, NVLink 160 GB/s.
# - V100 SXM2: NVIDIA Tesla V100 datasheet (2017/2020): 15.7 TFLOP/s fp32, HBM2 900 GB/s, NVLink 300 GB/s.
# - A100 SXM4 40GB: NVIDIA A100 datasheet (2020/2021): 156 TFLOP/s TF32 dense, HBM2 1,555 GB/s
#   (80GB: 2,039 GB/s), NVLink 600 GB/s.
# - H100 SXM5: NVIDIA H100 datasheet (2022/2023): 494.7 TFLOP/s TF32 dense (989 with sparsity),
#   HBM3 3.35 TB/s, NVLink 900 GB/s.
# PCIe x16 per direction, effective after protocol overhead: gen3 ~12 GB/s (P100, V100 hosts), gen4
# ~25 GB/s (A100), gen5 ~50 GB/s (H100). A100 and H100 figures are TF32 (TensorFlow's default math
# for fp32 models on those GPUs); P100 and V100 have no TF32: fp32.
_PCIE3, _PCIE4, _PCIE5 = 12 * GB, 25 * GB, 50 * GB
_P100 = dict(peak_flops=10.6e12, memory=732 * GB, pcie=_PCIE3)
_V100 = dict(peak_flops=15.7e12, memory=900 * GB, pcie=_PCIE3)
_A100 = dict(peak_flops=156e12, memory=1555 * GB, pcie=_PCIE4)
_H100 = dict(peak_flops=494.7e12, memory=3350 * GB, pcie=_PCIE5)

PRESETS = {
    # one GPU per host
    "v100-10gbe": _preset("v100-10gbe", link_bits=10e9, latency_s=50e-6, **_V100,
                          description="NVIDIA V100 SXM2 (15.7 TFLOP/s fp32, 900 GB/s HBM2) per worker, "
                                      "10 Gb/s Ethernet"),
    "a100-ib100": _preset("a100-ib100", link_bits=100e9, latency_s=10e-6, **_A100,
                          description="NVIDIA A100 SXM4 40GB (156 TFLOP/s TF32 dense, 1,555 GB/s HBM2) per worker, "
                                      "100 Gb/s InfiniBand HDR100"),
    "h100-400g": _preset("h100-400g", link_bits=400e9, latency_s=5e-6, **_H100,
                         description="NVIDIA H100 SXM5 (494.7 TFLOP/s TF32 dense, 3.35 TB/s HBM3) per worker, "
                                     "400 Gb/s NDR InfiniBand"),
    # several GPUs behind one NIC per host
    "p100x4-25g": _preset("p100x4-25g", link_bits=25e9, latency_s=50e-6, gpus=4, nvlink=80 * GB, **_P100,
                          description="4x NVIDIA P100 SXM2 (10.6 TFLOP/s fp32, 732 GB/s HBM2, NVLink 1.0) "
                                      "per host, 25 Gb/s Ethernet"),
    **{f"v100x8-{gbit}g": _preset(f"v100x8-{gbit}g", link_bits=gbit * 1e9, latency_s=latency, gpus=8,
                                  nvlink=150 * GB, **_V100,
                                  description=f"8x NVIDIA V100 SXM2 (15.7 TFLOP/s fp32, 900 GB/s HBM2, NVLink 2.0) "
                                              f"per host (DGX-1 class), {gbit} Gb/s Ethernet")
       for gbit, latency in ((10, 50e-6), (25, 50e-6), (100, 10e-6))},
    "a100x8-ib200": _preset("a100x8-ib200", link_bits=200e9, latency_s=5e-6, gpus=8, nvlink=300 * GB, **_A100,
                            description="8x NVIDIA A100 SXM4 40GB (156 TFLOP/s TF32 dense, 1,555 GB/s HBM2, "
                                        "NVLink 3.0) per host, one 200 Gb/s HDR InfiniBand NIC"),
    "h100x8-ib400": _preset("h100x8-ib400", link_bits=400e9, latency_s=5e-6, gpus=8, nvlink=450 * GB, **_H100,
                            description="8x NVIDIA H100 SXM5 (494.7 TFLOP/s TF32 dense, 3.35 TB/s HBM3, "
                                        "NVLink 4.0) per host, one 400 Gb/s NDR InfiniBand NIC"),
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
    """A 'local' Hardware from measured figures (bench/driver/calibration.py: conv and matmul FLOP/s,
    and an optional ``pass_s``)."""
    return Hardware(
        name="local", worker_conv_flops=data["worker_conv_flops"], worker_dense_flops=data["worker_dense_flops"],
        ps_flops=data["worker_dense_flops"], worker_bandwidth=10e9, ps_bandwidth=10e9, latency_s=50e-6,
        is_preset=False, description=description + "; link defaults to 10 Gb/s: set it to what the "
        "(emulated) network provides", pass_s=data.get("pass_s"))


_OPTIONAL_RATES = ("memory_bandwidth", "host_device_bandwidth", "intra_host_bandwidth", "ps_memory_bandwidth")


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
                        "worker_dense_flops", "pass_s"} - set(_OPTIONAL_RATES) - {"gpus_per_host"}
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
    for key in set(_OPTIONAL_RATES) & set(data):
        if not float(data[key]) > 0:
            raise UserError(f"hardware file {path}: {key} must be positive (bytes/s)")
        data[key] = float(data[key])
    gpus = data.setdefault("gpus_per_host", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise UserError(f"hardware file {path}: gpus_per_host must be a positive integer, got {gpus!r}")
    data.setdefault("is_preset", False)
    data.setdefault("description", f"from {path}")
    return Hardware(**data)


def load_hardware(spec: Optional[str] = None, bandwidth=None, ps_bandwidth=None, latency=None) -> Hardware:
    """A Hardware, a preset name or a JSON file; link/latency overrides apply on top.

    ``bandwidth`` sets every link (workers and PS) unless ``ps_bandwidth`` is also given.
    'local' is refused: only the driver measures this machine (bench/driver/calibration.py).
    """
    spec = spec or DEFAULT_PRESET
    if isinstance(spec, Hardware):
        hardware = spec
    elif spec in PRESETS:
        hardware = PRESETS[spec]
    elif spec == "local":
        raise UserError("hardware 'local' is measured by the driver, not the engine: pass "
                        "bench.driver.calibration.resolve_hardware('local') (or ralp-bench analyze --hardware local)")
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
