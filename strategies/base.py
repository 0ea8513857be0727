"""The one interface every training strategy implements, and their registry.

A strategy owns the model's placement and one synchronous training step; the
trainer (bench/rank/trainer.py) owns the timing, evaluation and traffic metering,
so every strategy is measured by the same code. Strategies live one per
module: strategies/ps.py, strategies/ps_async.py, strategies/horovod.py and
strategies/ralp_placement.py, and the one-process reference
strategies/single.py; the harness depends on them, never the reverse.
"""
import abc
import importlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from bench.core.config import RunConfig
from bench.core.strategy_specs import spec_of
from bench.data import batch_indices
from ralp.sharding import creation_elements, least_loaded


@dataclass
class Shards:
    """Each worker's resident training shard and the held-out split."""
    x: List[np.ndarray]
    y: List[np.ndarray]
    eval_x: np.ndarray
    eval_y: np.ndarray


@dataclass
class StrategyContext:
    config: RunConfig
    shards: Shards
    worker_devices: List[str] = field(default_factory=list)   # TF layout only
    ps_devices: List[str] = field(default_factory=list)
    cut: Optional[str] = None                                  # ralp: where to split
    extra: Dict = field(default_factory=dict)


class Strategy(abc.ABC):
    """Build once with ``setup``, then call ``train_step`` once per step."""

    name = "?"
    uses_horovod = False        # the workers layout starts Horovod before setup (horovod)
    per_step_timing = True      # False: only total time is meaningful (async)
    connects_to_cluster = True  # False: the strategy connects the chief to the TF cluster itself

    def __init__(self, ctx: StrategyContext):
        self.ctx = ctx
        self.config = ctx.config

    @abc.abstractmethod
    def setup(self) -> None:
        """Create variables where they belong and trace the step function."""

    @abc.abstractmethod
    def train_step(self, step: int) -> float:
        """Run one synchronous training step; block until it is done; return the loss."""

    def train_steps(self, first_step: int, count: int) -> List[float]:
        return [self.train_step(first_step + i) for i in range(count)]

    @abc.abstractmethod
    def evaluate(self) -> float:
        """Top-1 accuracy on the held-out split with the current weights."""

    @abc.abstractmethod
    def trainable_weights(self) -> List[np.ndarray]:
        """Current trainable weights in model order (for equivalence checks)."""

    def describe(self) -> Dict:
        """What actually ran: recorded in the result row."""
        return {"plan": self.name, "cut_layer": None}


def strategy_class(name: str):
    """The implementation of ``name`` (bench/core/strategy_specs.py), imported only now, so
    Horovod is loaded only where it trains."""
    module_name, cls = spec_of(name).implementation.split(":")
    return getattr(importlib.import_module(module_name), cls)


def batch_indices_for(config: RunConfig, shards: Shards, step: int) -> List[np.ndarray]:
    """The indices each worker trains on at ``step``: identical for every strategy."""
    return [batch_indices(step, config.batch_size, len(shards.y[w]), config.seed, w).astype(np.int32)
            for w in range(config.workers)]


def loss_fn(labels, logits):
    import tensorflow as tf

    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def top1(labels, logits):
    import tensorflow as tf

    return tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32))


def variables_on_ps(ps_devices: List[str]):
    """Variable-creator scope that puts each new variable on the least-loaded PS task.

    Greedy by elements (ralp/sharding.py, the rule the cost model prices), so a
    huge FC matrix and many small conv kernels end up balanced over S shards
    (with S = 1 everything lands on ps 0). Only the model's variables may be
    created inside it: an optimizer slot must follow its variable, not the rule.
    """
    import tensorflow as tf

    load = [0] * len(ps_devices)

    def creator(next_creator, **kwargs):
        index = least_loaded(load)
        load[index] += creation_elements(kwargs)
        with tf.device(ps_devices[index]):
            return next_creator(**kwargs)

    return tf.variable_creator_scope(creator)
