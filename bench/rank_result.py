"""What rank 0 hands the driver: one typed result, written as JSON to --out.

The driver (bench/harness.py) turns it into a row; a field added here is a field both sides
know, and a result file with unknown or missing fields is refused by name instead of being
half read.
"""
import dataclasses
import json
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
