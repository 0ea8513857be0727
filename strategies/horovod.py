"""Horovod ring all-reduce: every rank a worker, no parameter server.

Each rank holds a full replica (same seed, then broadcast from rank 0 so the
replicas are identical even if initialisation differed), computes gradients
on its shard, and ``hvd.DistributedGradientTape`` averages them with a ring
all-reduce: each worker sends and receives 2·(N-1)/N·4P bytes per step.

Compression: ``fp16`` is Horovod's own (``hvd.Compression.fp16``: cast, ring
all-reduce in half precision, cast back: 2·(N-1)/N·2P bytes). ``int8`` and
``topk`` payloads cannot be summed inside a ring (each rank has its own scale,
its own indices), so, as sparse all-reduce implementations do, every rank
all-gathers the encoded payloads of all ranks and decodes and averages them
locally: (N-1)·payload bytes each way, which beats the fp32 ring only while
N < 8 for int8 (the cost model says the same). Top-k keeps error feedback.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from strategies.base import Strategy, batch_indices_for, loss_fn, top1
from strategies.codecs import ErrorFeedback, Float16, NoCompression, TopK, get_codec
from strategies.optim import MomentumSGD


class HorovodAllreduce(Strategy):
    name = "horovod"
    uses_horovod = True

    def setup(self):
        import horovod.tensorflow as hvd

        self.hvd = hvd
        cfg, shards = self.config, self.ctx.shards
        self.rank = hvd.rank()
        self.x = tf.constant(shards.x[self.rank])
        self.y = tf.constant(shards.y[self.rank].astype(np.int32))
        self.eval_x = tf.constant(shards.eval_x)
        self.eval_y = tf.constant(shards.eval_y.astype(np.int32))
        self.model = get_model(cfg.model_spec(), seed=cfg.seed)
        variables = self.model.trainable_variables
        self.optimizer = MomentumSGD(variables, cfg.learning_rate, cfg.momentum)
        hvd.broadcast_variables(self.model.variables, root_rank=0)  # the slots start at zero everywhere
        exchange = GradientExchange(hvd, cfg.compression)

        @tf.function
        def step(indices):
            x, y = tf.gather(self.x, indices), tf.gather(self.y, indices)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, self.model(x, training=True))
            self.optimizer.apply(exchange.average(tape, loss, variables))
            return hvd.allreduce(loss, op=hvd.Average, name="loss")

        @tf.function
        def evaluate():
            return top1(self.eval_y, self.model(self.eval_x, training=False))

        self._step, self._evaluate = step, evaluate

    def train_step(self, step: int) -> float:
        indices = batch_indices_for(self.config, self.ctx.shards, step)[self.rank]
        return float(self._step(tf.constant(indices)))

    def evaluate(self) -> float:
        return float(self._evaluate())

    def trainable_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]


class GradientExchange:
    """Averages the ranks' gradients through the codec of ``--compression`` (see module docstring).

    Create outside tf.function (top-k's error-feedback residuals are variables); call
    ``average`` from one traced step function. Every tensor's payload is packed into one
    buffer per payload part, so a step costs two all-gathers whatever the number of layers.
    """

    def __init__(self, hvd, spec):
        self.hvd = hvd
        self.codec = get_codec(spec)
        self.allreduce = isinstance(self.codec, (NoCompression, Float16))
        self.feedback = ErrorFeedback(self.codec) if isinstance(self.codec, TopK) else None

    def average(self, tape, loss, variables):
        hvd = self.hvd
        if self.allreduce:
            compression = hvd.Compression.fp16 if isinstance(self.codec, Float16) else hvd.Compression.none
            return hvd.DistributedGradientTape(tape, compression=compression).gradient(loss, variables)
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        sizes = [int(g.shape.num_elements()) for g in grads]
        if self.feedback is not None:
            return self._gathered_topk(grads, sizes)
        return self._gathered_int8(grads, sizes)

    def _gathered_int8(self, grads, sizes):
        hvd, ranks = self.hvd, self.hvd.size()
        payloads = [self.codec.encode(g) for g in grads]
        q = hvd.allgather(tf.concat([tf.reshape(p[0], [-1]) for p in payloads], 0), name="grad_int8_values")
        scales = hvd.allgather(tf.stack([p[1] for p in payloads]), name="grad_int8_scales")
        q = tf.reshape(tf.cast(q, tf.float32), [ranks, -1])
        scales = tf.reshape(scales, [ranks, len(grads)])
        out, offset = [], 0
        for i, (g, n) in enumerate(zip(grads, sizes)):
            decoded = q[:, offset:offset + n] * scales[:, i:i + 1]
            out.append(tf.reshape(tf.reduce_mean(decoded, axis=0), g.shape))
            offset += n
        return out

    def _gathered_topk(self, grads, sizes):
        hvd, ranks = self.hvd, self.hvd.size()
        values, indices, offset = [], [], 0
        for i, (g, n) in enumerate(zip(grads, sizes)):
            v, idx = self.feedback.encode(g, i)
            values.append(v)
            indices.append(idx + offset)  # flat index into all gradients laid end to end
            offset += n
        all_values = hvd.allgather(tf.concat(values, 0), name="grad_topk_values")
        all_indices = hvd.allgather(tf.concat(indices, 0), name="grad_topk_indices")
        summed = tf.scatter_nd(tf.expand_dims(all_indices, 1), all_values, [offset])  # duplicates add up
        parts = tf.split(summed / ranks, sizes)
        return [tf.reshape(p, g.shape) for p, g in zip(parts, grads)]
