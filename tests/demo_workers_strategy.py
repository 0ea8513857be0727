"""A workers-layout strategy that exists only for a test: every rank a worker, no Horovod.

Registered with ``layout="workers"`` (tests/demo_workers_spec.py), it must be what the ranks
run: the spec's layout decides the rank entry, not Horovod's class (issue 33). Each worker
computes its gradients, mpi4py's ``Allreduce`` sums them over the workers, and every worker
applies the same momentum update: single-process SGD on the global batch, by construction.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from strategies.base import Strategy, batch_indices_for, loss_fn, top1
from strategies.optim import MomentumSGD


class MpiAllreduce(Strategy):
    name = "mpi-allreduce"

    def setup(self):
        cfg, shards = self.config, self.ctx.shards
        self.index, self.comm = self.ctx.extra["worker_index"], self.ctx.extra["comm"]
        self.x = tf.constant(shards.x[self.index])
        self.y = tf.constant(shards.y[self.index].astype(np.int32))
        self.model = get_model(cfg.model_spec(), seed=cfg.seed)
        self.optimizer = MomentumSGD(self.model.trainable_variables, cfg.learning_rate, cfg.momentum)

        @tf.function
        def gradients(indices):
            x, y = tf.gather(self.x, indices), tf.gather(self.y, indices)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, self.model(x, training=True))
            return loss, tape.gradient(loss, self.model.trainable_variables)

        self._gradients = gradients

    def train_step(self, step: int) -> float:
        from mpi4py import MPI

        indices = batch_indices_for(self.config, self.ctx.shards, step)[self.index]
        loss, grads = self._gradients(tf.constant(indices))
        flat = np.concatenate([g.numpy().ravel() for g in grads] + [[float(loss)]])
        total = np.empty_like(flat)
        self.comm.Allreduce(flat, total, op=MPI.SUM)
        total /= self.config.workers
        parts = np.split(total[:-1], np.cumsum([int(np.prod(g.shape)) for g in grads])[:-1])
        self.optimizer.apply([tf.constant(p.reshape(g.shape), tf.float32) for p, g in zip(parts, grads)])
        return float(total[-1])

    def evaluate(self) -> float:
        eval_x, eval_y = self.ctx.shards.eval_x, self.ctx.shards.eval_y.astype(np.int32)
        return float(top1(tf.constant(eval_y), self.model(tf.constant(eval_x), training=False)))

    def trainable_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]

    def describe(self):
        return {"plan": self.name, "cut_layer": None}
