"""A ring all-reduce built in one TensorFlow graph (one client drives every task).

Why not Horovod's collective: the in-graph strategies (sync PS, RALP, the hybrid) are one
program driving every task, which Horovod's one-program-per-worker collective cannot join.
Each hop here is a tensor produced on one device and consumed on the next, which
TensorFlow's runtime sends directly between those two tasks; the traffic and the sums are
those of a ring all-reduce of one fused buffer (reduce-scatter, then all-gather:
2(N-1)/N x the buffer each way per device). Used among the workers for the hybrid's tower
gradients (one call per bucket, strategies/ralp_hybrid.py) and among the PS tasks for a sharded head's
partial sums (strategies/sharded_head.py).

With a ``codec`` (strategies/codecs.py: fp16 as ScaledFloat16, int8) every hop carries the codec's
payload: the sender encodes, the receiver decodes and adds its own chunk in fp32. Horovod's
fp16 compression sums in fp16 instead, because its reduction runs inside the collective on the
wire's dtype; here the receiver's add is our own op, so summing in fp32 costs no byte and keeps
each hop's rounding to one fp16 (or int8) encode of the partial sum, with the codec's per-chunk
scale keeping small gradients out of fp16's subnormals (a CPU has no faster fp16 add either).
The all-gather encodes each finished chunk once, on its owner, and forwards that payload; every
device, the owner included, decodes the same payload, so the results stay bitwise identical.
A codec must be stateless (top-k's error feedback would need a residual per hop: refused by
the hybrid, ralp/strategy_costs.py ``CODECS_OF``).
"""
from typing import List, Optional

import tensorflow as tf

def near_equal_sizes(n: int, parts: int) -> List[int]:
    """``n`` split into ``parts`` contiguous sizes differing by at most one (the first ones larger)."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def ring_allreduce(vectors: List[tf.Tensor], devices: List[str], codec: Optional[object] = None) -> List[tf.Tensor]:
    """The sum of equally long 1-D ``vectors`` (one per device), returned on every device.

    Reduce-scatter: at hop s, device w sends its partial chunk (w - s) mod W to device w+1,
    which adds its own; after W-1 hops device w holds the full chunk (w + 1) mod W.
    All-gather: at hop s, device w forwards full chunk (w + 1 - s) mod W to device w+1.
    Every chunk of the sum is computed once and copied, so the results are bitwise identical.
    ``codec`` (None: fp32 as is): what each hop carries (module docstring)."""
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
            sent = _hop(codec, _encode(codec, partial[w][c], devices[w]), devices[dst])
            with tf.device(devices[dst]):
                hop[dst][c] = partial[dst][c] + _decode(codec, sent, sizes[c])
        partial = hop
    # Each device's finished chunk, as it travels (the codec's payload), and as it is decoded.
    travelling = [{(w + 1) % W: _encode(codec, partial[w][(w + 1) % W], devices[w])} for w in range(W)]
    for s in range(W - 1):
        for w in range(W):
            c, dst = (w + 1 - s) % W, (w + 1) % W
            travelling[dst][c] = _hop(codec, travelling[w][c], devices[dst])
    out = []
    for w, device in enumerate(devices):
        with tf.device(device):
            out.append(tf.concat([_decode(codec, travelling[w][c], sizes[c]) for c in range(W)], axis=0))
    return out


def _encode(codec, chunk: tf.Tensor, device: str):
    """The chunk as it leaves ``device``: itself without a codec, else the codec's payload."""
    if codec is None:
        return chunk
    with tf.device(device):
        return tuple(codec.encode(chunk))


def _hop(codec, sent, device: str):
    """What ``device`` receives: a copy made there (TensorFlow moves it across the link)."""
    with tf.device(device):
        return tf.identity(sent) if codec is None else tuple(tf.identity(t) for t in sent)


def _decode(codec, received, size: int) -> tf.Tensor:
    """The fp32 chunk a receiver works with (under the caller's device scope)."""
    return received if codec is None else codec.decode(received, [size], tf.float32)
