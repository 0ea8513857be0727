"""Every training strategy described once, without TensorFlow: read by every layer.

The settings check names and codecs against it, the rank layout comes from ``layout``, the
ranks import ``implementation``, predictions use ``priced_as`` (a cost function of
ralp/strategy_costs.py), and the report and ``analyze`` order columns and pick colours and
labels from it. Adding a strategy is one module (its ``Strategy`` subclass) plus one entry
here; ``register`` adds one from outside the tree (a module named in RALP_STRATEGY_MODULES
registers itself on import, on the driver and on every rank).
"""
import importlib
import os
from dataclasses import dataclass
from typing import Dict, Optional

from bench.core.errors import UserError

LAYOUTS = ("tf", "workers", "single")


@dataclass(frozen=True)
class StrategySpec:
    name: str
    implementation: str              # "module:Class", imported only where it trains
    layout: str                      # tf: chief + PS tasks + workers; workers: every rank a worker; single: one rank
    description: str
    color: str                       # its colour in every plot
    priced_as: Optional[str] = None  # the cost function that predicts it (None: the cost model has no model of it)
    codecs: bool = True              # accepts --compression
    one_batch_per_step: bool = False  # a step trains one batch, not W (the one-process reference)
    colocatable: bool = False        # --ps-placement colocated applies (a PS task on every worker host)
    link_pattern: Optional[str] = None  # its traffic's shape, probed on emulated links (bench/launch/link_probe.py)
    splits: bool = False             # runs the model split at a cut (the analyzer's, or --cut)
    broadcasts_model: bool = False   # its setup sends the model from rank 0 to every rank (bench/core/config.py)
    label: str = ""                  # its short name in tables and legends ("": the name itself)

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", self.name)  # frozen: set once, here

    def pattern_for(self, ps_placement: str = "dedicated") -> Optional[str]:
        """The traffic pattern a run of this strategy puts on the links: colocated PS tasks make
        every worker host send to and receive from every other (all-to-all), not to one PS host."""
        if self.colocatable and ps_placement == "colocated":
            return "all-to-all"
        return self.link_pattern


SPECS: Dict[str, StrategySpec] = {}
AUTO = "auto"  # not a strategy: the analyzer picks one of the priced ones


def register(spec: StrategySpec) -> StrategySpec:
    if spec.layout not in LAYOUTS:
        raise ValueError(f"strategy {spec.name}: layout must be one of {LAYOUTS}, got {spec.layout!r}")
    if spec.name == AUTO or ":" not in spec.implementation:
        raise ValueError(f"strategy {spec.name}: a name other than auto and an implementation 'module:Class'")
    SPECS[spec.name] = spec
    return spec


for _spec in (
    StrategySpec("single", "strategies.single:SingleProcess", "single",
                 "one process alone, no communication (the scaling-efficiency reference)", "#7f7f7f",
                 priced_as="horovod", codecs=False, one_batch_per_step=True, label="single process"),
    StrategySpec("ps", "strategies.ps:SyncPS", "tf", "synchronous parameter server (TensorFlow)", "#d62728",
                 priced_as="ps", colocatable=True, link_pattern="fan-in", label="sync PS"),
    StrategySpec("ps-async", "strategies.ps_async:AsyncPS", "tf",
                 "asynchronous parameter server (ParameterServerStrategy)", "#ff7f0e", codecs=False,
                 link_pattern="fan-in", label="async PS"),
    StrategySpec("horovod", "strategies.horovod:HorovodAllreduce", "workers", "Horovod ring all-reduce",
                 "#1f77b4", priced_as="horovod", link_pattern="all-reduce", broadcasts_model=True,
                 label="Horovod (ring)"),
    StrategySpec("ralp", "strategies.ralp_placement:LayerPlacement", "tf", "FC layers on the PS (RALP)", "#2ca02c",
                 priced_as="ralp", link_pattern="fan-in", splits=True, label="FC-on-PS"),
    StrategySpec("ralp-hybrid", "strategies.ralp_hybrid:HybridPlacement", "tf",
                 "conv tower all-reduced among the workers, FC layers on the PS (hybrid)", "#9467bd",
                 priced_as="ralp-hybrid", link_pattern="fan-in", splits=True, label="hybrid"),
):
    register(_spec)


def load_plugins():
    """Import the modules named in RALP_STRATEGY_MODULES (comma-separated); each registers its spec."""
    for name in filter(None, (m.strip() for m in os.environ.get("RALP_STRATEGY_MODULES", "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UserError(f"RALP_STRATEGY_MODULES names {name!r}, which cannot be imported ({exc})") from None


load_plugins()


def spec_of(name: str) -> StrategySpec:
    try:
        return SPECS[name]
    except KeyError:
        raise UserError(f"unknown strategy {name!r}; valid: {', '.join(strategy_names())}") from None


def rings_tower(name) -> bool:
    """Does the strategy sum its tower's gradients in the in-graph ring (strategies/ralp_hybrid.py), so that
    --hybrid-bucket-mb applies to it? Read through its spec, so a plugin priced as the hybrid counts too."""
    return name in SPECS and SPECS[name].priced_as == "ralp-hybrid"


def strategy_names():
    """What --strategy accepts: every registered strategy, and auto."""
    return tuple(SPECS) + (AUTO,)
