"""Horovod ring all-reduce: every rank a worker, no parameter server.

Each rank holds a full replica (same seed, then broadcast from rank 0 so the
replicas are identical even if initialisation differed), computes gradients
on its shard, and ``hvd.DistributedGradientTape`` averages them with a ring
all-reduce: each worker sends and receives 2·(N-1)/N·4P bytes per step.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from bench.optim import MomentumSGD
from bench.strategy import Strategy, batch_indices_for, loss_fn, top1


class HorovodAllreduce(Strategy):
    name = "horovod"
    uses_tf_cluster = False

    def setup(self):
        import horovod.tensorflow as hvd

        self.hvd = hvd
        cfg, shards = self.config, self.ctx.shards
        self.rank = hvd.rank()
        self.x = tf.constant(shards.x[self.rank])
        self.y = tf.constant(shards.y[self.rank].astype(np.int32))
        self.eval_x = tf.constant(shards.eval_x)
        self.eval_y = tf.constant(shards.eval_y.astype(np.int32))
        self.model = get_model(cfg.model, seed=cfg.seed)
        variables = self.model.trainable_variables
        self.optimizer = MomentumSGD(variables, cfg.learning_rate, cfg.momentum)
        hvd.broadcast_variables(self.model.variables + self.optimizer.slots, root_rank=0)
        compression = hvd.Compression.fp16 if cfg.compression == "fp16" else hvd.Compression.none

        @tf.function
        def step(indices):
            x, y = tf.gather(self.x, indices), tf.gather(self.y, indices)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, self.model(x, training=True))
            tape = hvd.DistributedGradientTape(tape, compression=compression)
            self.optimizer.apply(tape.gradient(loss, variables))
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
