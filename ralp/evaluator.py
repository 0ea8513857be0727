"""One evaluator for every strategy's step: ordered, dependent stages on shared resources.

Why: a strategy's step is a small program (pull, compute, send, wait, push) whose parts run
on a few physical resources at once. Each cost function (ralp/strategy_costs.py) states its
step as an ordered list of ``Stage``s: what each one uses (seconds of a worker's CPU, of a
direction of its NIC, of the PS's...), what it waits for. This module alone turns any such
list into time, bottleneck and breakdown, the same way for every strategy, so no strategy
needs a timing branch of its own: overlap comes from the dependencies (a layer's gradients
leave while the next layer's backward runs because nothing orders them), contention from the
resources (two stages that need the same link direction take turns, or share it).

A resource is one of ``RESOURCES`` on the priced host, or the same on another host named after
an ``@`` (``on_host``: ``"worker tx@pulling host"``): a step whose hosts do different work at once
(the colocated PS, where one host serves the largest shard while it pushes) states each host's
stages on its own resources, and the evaluator runs them side by side.

The schedule is the one a work-conserving dataflow executor gives (TensorFlow's runs every op
whose inputs are ready), simulated event by event: at each moment every stage whose inputs
have ended and whose resources are free starts, in the list's order. A stage holds all of its
resources until its longest part is done plus its ``latency`` (a transfer's last byte in
flight: the link's next transfer waits for it, as a stop-and-wait RPC does). Two such stages
take turns on a resource. A stage of a ``flow`` (a transfer over its own connections, as a
host's pushes or its serving are) instead shares its link directions with the other flows on
them, as concurrent TCP connections share a link: n flows each move at 1/n of its rate, so a
flow that starts while another is under way slows it by what it sends meanwhile. The stages of
one flow take turns, as the tensors written into one connection do.

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


def on_host(resource: str, host: Optional[str]) -> str:
    """``resource`` on ``host`` (None: the priced host, the plain name)."""
    return resource if host is None else f"{resource}@{host}"


def kind(resource: str) -> str:
    """Which of ``RESOURCES`` a resource is, on whichever host."""
    return resource.split("@", 1)[0]


@dataclass(frozen=True)
class Stage:
    """One piece of a step. ``work``: seconds of each resource it uses (all at once, at its full
    rate); ``after``: the names of earlier stages it waits for; ``latency``: seconds it lasts
    beyond its work, holding its resources (a transfer's hops); ``hold``: its duration where
    that is not its longest part plus its latency (a transfer staged through host memory, with
    the copies to the host and back around it), else None; ``phase``: the transfer (ralp/step_cost.py
    ``Phase``) or the piece of compute it belongs to, whose seconds the breakdown sums; ``flow``:
    the flow it is part of, which shares its links with the other flows on them (module
    docstring); None: it takes turns with every other stage on its resources."""
    name: str
    work: Mapping[str, float]
    after: Tuple[str, ...] = ()
    latency: float = 0.0
    hold: Optional[float] = None
    phase: Optional[str] = None
    overhead: bool = False  # work a better implementation of the plan would not do (TensorFlow's transport CPU)
    flow: Optional[str] = None

    @property
    def seconds(self) -> float:
        """How long it lasts alone."""
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
            group = GROUPS[kind(max(st.work, key=lambda r: st.work[r]))] if st.work else "worker compute"
            held[group] = held.get(group, 0.0) + self.end[name] - self.start[name]
        return max(held, key=held.get) if held else "worker compute"


def _checked(stages: Sequence[Stage]) -> Dict[str, Stage]:
    by_name: Dict[str, Stage] = {}
    for st in stages:
        if st.name in by_name:
            raise ValueError(f"two stages are called {st.name!r}")
        unknown = [d for d in st.after if d not in by_name]
        if unknown:
            raise ValueError(f"stage {st.name!r} waits for {unknown}, which are not stages before it")
        bad = [r for r in st.work if kind(r) not in RESOURCES]
        if bad:
            raise ValueError(f"stage {st.name!r} uses unknown resources {bad}; one of {', '.join(RESOURCES)}"
                             " (on another host: resource@host)")
        if st.flow is not None and (st.hold is not None or any(kind(r) not in LINKS for r in st.uses())):
            raise ValueError(f"stage {st.name!r} is part of a flow, which only a transfer on links with no hold can be")
        by_name[st.name] = st
    return by_name


class _Run:
    """The simulation's state at one moment (``evaluate``)."""

    def __init__(self, stages: Sequence[Stage]):
        self.by_name = _checked(stages)
        self.order = {st.name: i for i, st in enumerate(stages)}
        self.uses = {st.name: st.uses() for st in stages}
        self.waiting = {st.name: len(set(st.after)) for st in stages}
        self.waiters: Dict[str, List[str]] = {}
        for st in stages:
            for d in set(st.after):
                self.waiters.setdefault(d, []).append(st.name)
        self.ready = [st.name for st in stages if not st.after]
        self.start: Dict[str, float] = {}
        self.end: Dict[str, float] = {}
        self.cause: Dict[str, Optional[str]] = {}
        self.users: Dict[str, List[str]] = {}                 # resource -> stages holding it now
        self.released: Dict[str, Tuple[float, str]] = {}      # resource -> (when, by whom) it was last freed
        self.ends: Dict[str, float] = {}                      # stages whose end is known, not yet reached
        self.flowing: Dict[str, float] = {}                   # flows' stages moving bytes -> share of them left

    def can_start(self, st: Stage) -> bool:
        for r in self.uses[st.name]:
            for holder in self.users.get(r, ()):
                flow = self.by_name[holder].flow
                if st.flow is None or flow is None or flow == st.flow:
                    return False
        return True

    def begin(self, name: str, t: float):
        st = self.by_name[name]
        why_t, why = 0.0, None
        for d in st.after:
            if self.end[d] > why_t:
                why_t, why = self.end[d], d
        for r in self.uses[name]:
            if r in self.released and self.released[r][0] > why_t:
                why_t, why = self.released[r]
        self.start[name], self.cause[name] = t, why
        self.ready.remove(name)
        for r in self.uses[name]:
            self.users.setdefault(r, []).append(name)
        if st.flow is not None and self.uses[name]:
            self.flowing[name] = 1.0
        else:
            self.ends[name] = t + st.seconds

    def finish(self, name: str, t: float):
        self.end[name] = t
        for r in self.uses[name]:
            self.users[r].remove(name)
            self.released[r] = (t, name)
        for w in self.waiters.get(name, []):
            self.waiting[w] -= 1
            if self.waiting[w] == 0:
                self.ready.append(w)

    def rates(self) -> Dict[str, float]:
        """Each flowing stage's share of its bytes moved per second: its slowest link's fair share
        (one flow has one stage on a link at a time: ``can_start``)."""
        count: Dict[str, int] = {}
        for name in self.flowing:
            for r in self.uses[name]:
                count[r] = count.get(r, 0) + 1
        return {name: min(1.0 / count[r] / self.by_name[name].work[r] for r in self.uses[name])
                for name in self.flowing}

    def start_all(self, t: float):
        """Start every stage that can start at ``t``, in the list's order. Starting a stage only
        takes resources, so one pass in order suffices, unless a stage that takes no time ended at
        once and readied others, which may come earlier in the list: then another pass."""
        again = True
        while again:
            again = False
            for name in sorted(self.ready, key=self.order.get):
                if self.can_start(self.by_name[name]):
                    self.begin(name, t)
                    if name in self.ends and self.ends[name] <= t:
                        del self.ends[name]
                        waiting = len(self.ready)
                        self.finish(name, t)
                        again = again or len(self.ready) > waiting


def evaluate(stages: Sequence[Stage]) -> Schedule:
    """The schedule of ``stages`` (module docstring); a stage may wait only for earlier ones."""
    run = _Run(stages)
    t = 0.0
    run.start_all(t)
    while run.ends or run.flowing:
        rates = run.rates()
        done_at = {name: t + left / rates[name] for name, left in run.flowing.items()}
        t_next = min(list(run.ends.values()) + list(done_at.values()))
        for name in list(run.flowing):
            if done_at[name] <= t_next:
                del run.flowing[name]
                run.ends[name] = t_next + run.by_name[name].latency   # its last bytes in flight
            else:
                run.flowing[name] -= rates[name] * (t_next - t)
        t = t_next
        for name in sorted((n for n, e in run.ends.items() if e <= t), key=run.order.get):
            del run.ends[name]
            run.finish(name, t)
        run.start_all(t)
    if run.ready or len(run.end) < len(stages):
        raise ValueError("stages wait for each other in a circle")  # cannot happen: each waits only for earlier ones
    end = run.end
    step = max(end.values(), default=0.0)
    critical, name = [], (max(end, key=lambda n: (end[n], run.order[n])) if end else None)
    while name is not None:
        critical.append(name)
        name = run.cause[name]
    return Schedule(run.start, end, step, critical, run.by_name)


def bound(stages: Sequence[Stage], latency_s: float) -> Tuple[float, Dict[str, float]]:
    """The step with every resource busy at once: the busiest resource's seconds, a link's plus
    one ``latency_s`` (its last byte's flight; the others overlap traffic). Returns (seconds, each
    of ``RESOURCES``' busy seconds on its busiest host, links with their latency)."""
    busy: Dict[str, float] = {}
    for st in stages:
        if not st.overhead:
            for r, s in st.work.items():
                busy[r] = busy.get(r, 0.0) + s
    if any(s > 0 and kind(r) in LINKS for r, s in busy.items()):
        busy = {r: s + latency_s if kind(r) in LINKS and s > 0 else s for r, s in busy.items()}
    timed = {r: max((s for q, s in busy.items() if kind(q) == r), default=0.0) for r in RESOURCES}
    return max(timed.values(), default=0.0), timed
