"""What rank 0 hands the driver: one typed result, as JSON.

The driver (bench/driver/harness.py) turns it into a row; a field added here is a field both sides
know, and a result with unknown or missing fields is refused by name instead of being half read.

How it travels: as ``RALP-RESULT`` lines in rank 0's output, which mpirun brings to the driver
wherever the driver runs (``result_lines`` / ``ResultReceiver``); rank 0's host and the driver's
need share no filesystem, as on a real cluster where each host has its own /tmp (issue 34).
``--out FILE`` instead writes the JSON to FILE on rank 0's host (a user's own mpirun); without
it, ``python -m bench.rank.result < OUTPUT`` reads the JSON back out of a saved output.
"""
import base64
import dataclasses
import json
import re
import sys
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class RankResult:
    plan: str                                   # the strategy that ran (its describe())
    cut_layer: Optional[str]
    timed_steps: int
    step_times: List[float]                     # seconds per timed step
    per_step_timing: bool                       # False: chunks of steps were timed (ps-async)
    losses: List[float]
    evals: List[dict]
    setup_s: float
    train_time_s: float
    bytes_by_host: Dict[str, List[int]]         # host -> [tx, rx] over the timed steps
    tcp_by_host: Dict[str, List[int]]           # host -> [segments sent, retransmitted, timeouts]
    final_accuracy: Optional[float] = None
    steps_to_accuracy: Optional[int] = None
    time_to_accuracy_s: Optional[float] = None
    ps_hosts: List[str] = field(default_factory=list)
    worker_hosts: List[str] = field(default_factory=list)
    strategy_requested: Optional[str] = None
    plan_reason: Optional[str] = None
    started_unix: Optional[float] = None
    world: Optional[int] = None
    # host -> {source: [tx, rx]} over the timed steps, the sources bytes_by_host sums (each NIC
    # routing to a peer, each RDMA port as "ib:HCA/PORT"; bench/launch/nic.py)
    bytes_by_source: Dict[str, Dict[str, List[int]]] = field(default_factory=dict)
    # the link check's all-reduce made by this run's ranks before training (--link-probe-floats):
    # {"floats", "seconds" (median of 3), "steal"}; None where the driver probes apart
    link_probe: Optional[Dict[str, float]] = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RankResult":
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"rank result has fields this driver does not know: {', '.join(unknown)}")
        return cls(**data)


# ---- the result over mpirun's output ---------------------------------------------------

RESULT_MARKER = "RALP-RESULT"
CHUNK_CHARS = 400  # a line stays far below PIPE_BUF (4096), so each is one atomic write
COPIES = 2
_CHUNK = re.compile(rf"^{RESULT_MARKER} (\d+)/(\d+) ([0-9a-f]{{8}}) ([A-Za-z0-9+/=]*)\s*$")


def result_lines(text: str) -> List[str]:
    """``text`` as marked lines: compressed, base64, cut in numbered chunks, each with its CRC-32.

    Why chunks, a CRC and two copies: Open MPI forwards a rank's output in reads of a few KiB
    and writes other ranks' output between them, so a long line can arrive cut in two with
    another rank's text inside. A chunk that arrives damaged fails its CRC and is taken from
    the other copy, which lies one whole copy further on in the stream."""
    payload = base64.b64encode(zlib.compress(text.encode(), 9)).decode()
    pieces = [payload[i:i + CHUNK_CHARS] for i in range(0, len(payload), CHUNK_CHARS)]
    one = [f"{RESULT_MARKER} {i}/{len(pieces)} {zlib.crc32(p.encode()):08x} {p}\n" for i, p in enumerate(pieces, 1)]
    return one * COPIES


class ResultReceiver:
    """Collects rank 0's RALP-RESULT lines from a launch's output (bench/launch/base.py's reader)."""

    def __init__(self):
        self.total: Optional[int] = None
        self.pieces: Dict[int, str] = {}
        self.damaged = 0

    def feed(self, line: str) -> bool:
        """Take one line that starts with the marker; False (and counted) when it is damaged."""
        m = _CHUNK.match(line)
        intact = m and zlib.crc32(m.group(4).encode()) == int(m.group(3), 16)
        if not intact or not 1 <= int(m.group(1)) <= int(m.group(2)):
            self.damaged += 1
            return False
        self.total = int(m.group(2))
        self.pieces[int(m.group(1))] = m.group(4)
        return True

    @property
    def complete(self) -> bool:
        return self.total is not None and len(self.pieces) == self.total

    def missing(self) -> str:
        """'no result' or 'pieces 3, 7 of 9 missing (2 damaged lines)', for an error message."""
        if self.total is None:
            return f"no result arrived ({self.damaged} damaged lines)" if self.damaged else "no result arrived"
        gone = [str(i) for i in range(1, self.total + 1) if i not in self.pieces]
        return f"pieces {', '.join(gone)} of {self.total} missing ({self.damaged} damaged lines)"

    def text(self) -> str:
        """The JSON rank 0 sent; ValueError when pieces are missing."""
        if not self.complete:
            raise ValueError(f"rank 0's result is incomplete: {self.missing()}")
        payload = "".join(self.pieces[i] for i in range(1, self.total + 1))
        return zlib.decompress(base64.b64decode(payload)).decode()


def main(stream) -> int:
    """``python -m bench.rank.result < mpirun-output``: the JSON a user's own mpirun run without
    --out printed as RALP-RESULT lines, wherever they sit in the lines (other ranks' text around)."""
    received = ResultReceiver()
    for line in stream:
        while RESULT_MARKER + " " in line:
            line = line[line.index(RESULT_MARKER + " "):]
            end = line.find(RESULT_MARKER + " ", 1)
            received.feed(line if end < 0 else line[:end])
            line = "" if end < 0 else line[end:]
    try:
        print(received.text())
    except ValueError as exc:
        print(f"ralp-bench: error: {exc}; was the whole output of the run given?", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.stdin))
