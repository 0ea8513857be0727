"""One evaluator for every strategy's step: ordered, dependent stages on shared resources.

Why: a strategy's step is a small program (pull, compute, send, wait, push) whose parts run
on a few physical resources at once. Each cost function (ralp/strategy_costs.py) states its
step as an ordered list of ``Stage``s: what each one uses (seconds of a worker's CPU, of a
direction of its NIC, of the PS's...), what it waits for. This module alone turns any such
list into time, bottleneck and breakdown, the same way for every strategy, so no strategy
needs a timing branch of its own: overlap comes from the dependencies (a layer's gradients
leave while the next layer's backward runs because nothing orders them), contention from the
resources (two stages that need the same link direction take turns).

The schedule is the one a work-conserving dataflow executor gives (TensorFlow's runs every op
whose inputs are ready): a stage starts as soon as everything it waits for has ended and
every resource it uses is free; among the stages that could start, the earliest first, ties
in the list's order. A stage holds all of its resources until its longest part is done plus
its ``latency`` (a transfer's last byte in flight: the link's next transfer waits for it, as
a stop-and-wait RPC does). Resources are not shared within a stage's lifetime (a link runs
one transfer at a time): where two flows really share a link the cost function says so in
their stages.

The bound (``bound``) is the same list with the order taken away: every resource busy at
once, the busiest one's seconds (a link's plus one latency), what a perfect implementation of
the same plan could reach; it leaves out the stages marked ``overhead`` (TensorFlow's
transport CPU), which such an implementation would not run.
"""
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

WORKER_CPU, PS_CPU = "worker cpu", "ps cpu"
WORKER_TX, WORKER_RX, PS_TX, PS_RX = "worker tx", "worker rx", "ps tx", "ps rx"
INTRA, PCIE = "intra", "pcie"     # a host's device-to-device link; a device's link to its host's memory
LINKS = (WORKER_TX, WORKER_RX, PS_TX, PS_RX, INTRA, PCIE)
RESOURCES = (WORKER_CPU, PS_CPU) + LINKS
# What a step's bottleneck is called (Prediction.bottleneck): each resource's group.
GROUPS = {WORKER_CPU: "worker compute", PS_CPU: "PS compute", WORKER_TX: "worker link", WORKER_RX: "worker link",
          INTRA: "worker link", PCIE: "worker link", PS_TX: "PS link", PS_RX: "PS link"}


@dataclass(frozen=True)
class Stage:
    """One piece of a step. ``work``: seconds of each resource it uses (all at once); ``after``:
    the names of earlier stages it waits for; ``latency``: seconds it lasts beyond its work,
    holding its resources (a transfer's hops); ``hold``: its duration where that is not its own
    work (a transfer that waits for the slowest of several hosts while ``work`` is the priced
    host's own share), else None; ``phase``: the transfer (ralp/step_cost.py ``Phase``) or the
    piece of compute it belongs to, whose seconds the breakdown sums."""
    name: str
    work: Mapping[str, float]
    after: Tuple[str, ...] = ()
    latency: float = 0.0
    hold: Optional[float] = None
    phase: Optional[str] = None
    overhead: bool = False  # work a better implementation of the plan would not do (TensorFlow's transport CPU)

    @property
    def seconds(self) -> float:
        if self.hold is not None:
            return self.hold
        return max(self.work.values(), default=0.0) + self.latency

    def uses(self) -> List[str]:
        return [r for r, s in self.work.items() if s > 0]


@dataclass
class Schedule:
    """When each stage ran, the step's length, and the critical path: the chain of stages, last
    to first, each of which started when the one before it ended (as its input or as the holder
    of its resource)."""
    start: Dict[str, float]
    end: Dict[str, float]
    step_s: float
    critical: List[str] = field(default_factory=list)
    stages: Dict[str, Stage] = field(default_factory=dict)

    def phase_seconds(self) -> Dict[str, float]:
        """Each phase's stages' seconds summed (its length had it run alone)."""
        out: Dict[str, float] = {}
        for st in self.stages.values():
            if st.phase:
                out[st.phase] = out.get(st.phase, 0.0) + st.seconds
        return out

    def span(self, names: Iterable[str]) -> float:
        """Seconds from the first of ``names`` starting to the last ending (0 for none)."""
        names = [n for n in names if n in self.end]
        return max(self.end[n] for n in names) - min(self.start[n] for n in names) if names else 0.0

    def bottleneck(self) -> str:
        """The resource group that holds the critical path longest (``GROUPS``): where a faster
        resource would shorten the step."""
        held: Dict[str, float] = {}
        for name in self.critical:
            st = self.stages[name]
            group = GROUPS[max(st.work, key=lambda r: st.work[r])] if st.work else "worker compute"
            held[group] = held.get(group, 0.0) + self.end[name] - self.start[name]
        return max(held, key=held.get) if held else "worker compute"


def evaluate(stages: Sequence[Stage]) -> Schedule:
    """The schedule of ``stages`` (module docstring); a stage may wait only for earlier ones."""
    by_name: Dict[str, Stage] = {}
    for st in stages:
        if st.name in by_name:
            raise ValueError(f"two stages are called {st.name!r}")
        unknown = [d for d in st.after if d not in by_name]
        if unknown:
            raise ValueError(f"stage {st.name!r} waits for {unknown}, which are not stages before it")
        bad = [r for r in st.work if r not in RESOURCES]
        if bad:
            raise ValueError(f"stage {st.name!r} uses unknown resources {bad}; one of {', '.join(RESOURCES)}")
        by_name[st.name] = st
    free: Dict[str, float] = {r: 0.0 for r in RESOURCES}
    holder: Dict[str, Optional[str]] = {r: None for r in RESOURCES}
    start, end, cause = {}, {}, {}
    waiting = {st.name: len(set(st.after)) for st in stages}
    waiters: Dict[str, List[str]] = {}
    for st in stages:
        for d in set(st.after):
            waiters.setdefault(d, []).append(st.name)
    order = {st.name: i for i, st in enumerate(stages)}
    ready = [st.name for st in stages if not st.after]
    while ready:
        best, best_start, best_cause = None, 0.0, None
        for name in ready:
            st = by_name[name]
            t, why = 0.0, None
            for d in st.after:
                if end[d] > t:
                    t, why = end[d], d
            for r in st.uses():
                if free[r] > t:
                    t, why = free[r], holder[r]
            if best is None or t < best_start - 1e-15 or (abs(t - best_start) <= 1e-15 and order[name] < order[best]):
                best, best_start, best_cause = name, t, why
        st = by_name[best]
        ready.remove(best)
        start[best], end[best], cause[best] = best_start, best_start + st.seconds, best_cause
        for r in st.uses():
            free[r], holder[r] = end[best], best
        for w in waiters.get(best, []):
            waiting[w] -= 1
            if waiting[w] == 0:
                ready.append(w)
    step = max(end.values(), default=0.0)
    critical, name = [], (max(end, key=lambda n: (end[n], order[n])) if end else None)
    while name is not None:
        critical.append(name)
        name = cause[name]
    return Schedule(start, end, step, critical, by_name)


def bound(stages: Sequence[Stage], latency_s: float) -> Tuple[float, Dict[str, float]]:
    """The step with every resource busy at once: the busiest resource's seconds, a link's plus
    one ``latency_s`` (its last byte's flight; the others overlap traffic). Returns (seconds, each
    resource's busy seconds, links with their latency)."""
    busy = {r: sum(st.work.get(r, 0.0) for st in stages if not st.overhead) for r in RESOURCES}
    links = max(busy[r] for r in LINKS)
    timed = {**busy, **({r: busy[r] + latency_s for r in LINKS if busy[r] > 0} if links > 0 else {})}
    return max(timed.values(), default=0.0), timed
