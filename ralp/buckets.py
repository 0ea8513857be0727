"""Which gradients each ring of a bucketed all-reduce carries: the rule strategies/ralp_hybrid.py runs and
ralp/strategy_costs.py prices, in one place without TensorFlow (as ralp/sharding.py is for
the PS's variables).
"""
from typing import List, Sequence

MIB = 2 ** 20  # bucket sizes are given in MiB (--hybrid-bucket-mb), as Horovod's fusion buffer


def buckets(sizes: Sequence[float], cap: float) -> List[List[int]]:
    """Layers grouped into the rings of a bucketed all-reduce: indices into ``sizes`` (each
    layer's gradient bytes, forward order) in contiguous groups, the groups in backward order
    (the last layers first: their gradients are ready first), each group's indices ascending.
    A group takes layers while it stays within ``cap`` bytes, so a layer is never split and one
    larger than ``cap`` is a group alone (PyTorch DDP's bucket rule); ``cap`` <= 0: one group.
    Layers without bytes join whichever group is open."""
    if not sizes:
        return []
    if cap <= 0:
        return [list(range(len(sizes)))]
    groups, current, total = [], [], 0.0
    for i in reversed(range(len(sizes))):
        if current and total + sizes[i] > cap:
            groups.append(current[::-1])
            current, total = [], 0.0
        current.append(i)
        total += sizes[i]
    groups.append(current[::-1])
    return groups
