"""Which PS task holds which variable: one rule for TensorFlow's placement and the cost model.

tf_cnn_benchmarks spreads variables over its PS tasks greedily by size
(``variable_mgr``'s greedy load balancing): each new variable goes to the task
holding the fewest elements so far, ties to the lowest index. The strategies
place variables with it (strategies.base.variables_on_ps) and the cost model
prices each task's share with it, so predicted and measured bytes per host
come from the same assignment. One huge FC matrix still lands whole on one
task: shards are variables, not slices, as in the reference tool.
"""
from typing import List, Sequence

import numpy as np


def least_loaded(load: Sequence[int]) -> int:
    """Index of the task with the fewest elements (the first one on a tie)."""
    return min(range(len(load)), key=load.__getitem__)


def shard_loads(sizes: Sequence[int], tasks: int) -> List[int]:
    """Elements on each of ``tasks`` PS tasks after placing ``sizes`` in creation order."""
    if tasks < 1:
        raise ValueError(f"need at least one PS task, got {tasks}")
    load = [0] * tasks
    for size in sizes:
        load[least_loaded(load)] += int(size)
    return load


def creation_elements(kwargs) -> int:
    """Elements of a variable about to be created (a variable creator's kwargs). Keras'
    bookkeeping scalars (train/test/predict counters) come without a shape and weigh
    nothing, so the model's weights are dealt the same with or without them."""
    shape = kwargs.get("shape")
    if shape is None or None in tuple(shape):
        return 0
    return int(np.prod(tuple(shape)))
