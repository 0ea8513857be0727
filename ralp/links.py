"""A cluster's links, described once: parsed from the flags (or a sweep's keys) a single time,
then read by every layer — the emulated cluster shapes its NICs with it (tc), the cost model
prices transfers with it (``Hardware`` overrides), the row records it, and the ranks get it
back as the flags it was parsed from (``flags``). TF-free.

Why one object: before it, the rates were parsed in the launcher, written back into the
settings as strings, and parsed again for the cost model, and ``--ps-bandwidth``/``--latency``
shaped the links without reaching the predictions.
"""
from dataclasses import dataclass
from typing import Dict, Optional

from ralp.hardware import PRESETS, format_bandwidth, parse_bandwidth, parse_latency


@dataclass(frozen=True)
class LinkSpec:
    worker_bps: float                 # bit/s of each worker host's NIC, per direction
    ps_bps: Optional[float] = None    # bit/s of each PS host's NIC (None: as the workers')
    latency_s: float = 0.0            # one-way delay added on every NIC
    scaled_to: Optional[str] = None   # the preset whose compute/network ratio set worker_bps
    measured: bool = False            # worker_bps measured (one TCP flow), not stated or built

    @classmethod
    def parse(cls, bandwidth, ps_bandwidth=None, latency=None, scaled_to=None) -> "LinkSpec":
        """Flags as people type them ('1gbit', '0.1ms'); a bad one is one line naming the fix."""
        worker = parse_bandwidth(bandwidth)
        ps = parse_bandwidth(ps_bandwidth) if ps_bandwidth not in (None, "") else None
        return cls(worker, ps if ps != worker else None, parse_latency(latency) if latency not in (None, "") else 0.0,
                   scaled_to)

    @property
    def ps_link_bps(self) -> float:
        return self.ps_bps or self.worker_bps

    @property
    def nic_bps(self) -> Optional[float]:
        """The NIC a scaled link stands for (the preset's), whose packets the emulated link carries
        (bench/launch/netns.py ``shape_link``); None for a link that is what it says."""
        return PRESETS[self.scaled_to].worker_bandwidth if self.scaled_to in PRESETS else None

    def row_fields(self) -> Dict:
        """What a result row records about the links."""
        return {"link_bps": self.worker_bps, "ps_link_bps": self.ps_link_bps, "latency_s": self.latency_s,
                "scaled_to": self.scaled_to, "link_measured": self.measured}

    def hardware_overrides(self) -> Dict:
        """``ralp.hardware.load_hardware`` keyword overrides: the links the cost model prices."""
        return {"bandwidth": self.worker_bps, "ps_bandwidth": self.ps_link_bps, "latency": self.latency_s}

    def flags(self) -> Dict[str, Optional[str]]:
        """The settings' link fields (bandwidth, ps_bandwidth, latency) as exact strings, for the
        ranks' command lines and commands people copy; ``parse`` reads them back unchanged."""
        return {"bandwidth": f"{self.worker_bps:.0f}",
                "ps_bandwidth": f"{self.ps_bps:.0f}" if self.ps_bps else None,
                "latency": f"{self.latency_s:g}"}

    def describe(self) -> str:
        ps = f", PS hosts {format_bandwidth(self.ps_bps)}" if self.ps_bps else ""
        lat = f", +{self.latency_s * 1e3:g} ms" if self.latency_s else ""
        scaled = f" (scaled to {self.scaled_to})" if self.scaled_to else ""
        return f"{format_bandwidth(self.worker_bps)}{ps}{lat}{scaled}"
