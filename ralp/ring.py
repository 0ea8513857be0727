"""A ring all-reduce built in one TensorFlow graph (one client drives every task).

Why not Horovod's collective: the in-graph strategies (sync PS, RALP, the hybrid) are one
program driving every task, which Horovod's one-program-per-worker collective cannot join.
Each hop here is a tensor produced on one device and consumed on the next, which
TensorFlow's runtime sends directly between those two tasks; the traffic and the sums are
those of a ring all-reduce of one fused buffer (reduce-scatter, then all-gather:
2(N-1)/N x the buffer each way per device). Used among the workers for the hybrid's tower
gradients and among the PS tasks for a sharded head's partial sums (ralp/sharded_head.py).
"""
from typing import List

import tensorflow as tf


def near_equal_sizes(n: int, parts: int) -> List[int]:
    """``n`` split into ``parts`` contiguous sizes differing by at most one (the first ones larger)."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def ring_allreduce(vectors: List[tf.Tensor], devices: List[str]) -> List[tf.Tensor]:
    """The sum of equally long 1-D ``vectors`` (one per device), returned on every device.

    Reduce-scatter: at hop s, device w sends its partial chunk (w - s) mod W to device w+1,
    which adds its own; after W-1 hops device w holds the full chunk (w + 1) mod W.
    All-gather: at hop s, device w forwards full chunk (w + 1 - s) mod W to device w+1.
    Every chunk of the sum is computed once and copied, so the results are bitwise identical."""
    W = len(devices)
    if W == 1:
        return list(vectors)
    n = int(vectors[0].shape[0])
    sizes = near_equal_sizes(n, W)
    partial = []
    for w, device in enumerate(devices):
        with tf.device(device):
            partial.append(list(tf.split(vectors[w], sizes)))
    for s in range(W - 1):
        hop = [list(p) for p in partial]
        for w in range(W):
            c, dst = (w - s) % W, (w + 1) % W
            with tf.device(devices[dst]):
                hop[dst][c] = partial[dst][c] + partial[w][c]
        partial = hop
    full = [{(w + 1) % W: partial[w][(w + 1) % W]} for w in range(W)]
    for s in range(W - 1):
        for w in range(W):
            c, dst = (w + 1 - s) % W, (w + 1) % W
            with tf.device(devices[dst]):
                full[dst][c] = tf.identity(full[w][c])
    out = []
    for w, device in enumerate(devices):
        with tf.device(device):
            out.append(tf.concat([full[w][c] for c in range(W)], axis=0))
    return out
