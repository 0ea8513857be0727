"""One process training alone: the reference that scaling efficiency divides by.

The same model, batch size, data shard (worker 0's) and update rule as every
distributed strategy, on one emulated host of the same cluster (so under the
same CPU quota as each worker), with no communication at all. Horovod's own
scaling table is built the same way: images/sec at W workers over W times one.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from strategies.base import Strategy, batch_indices_for, loss_fn, top1
from strategies.optim import MomentumSGD


class SingleProcess(Strategy):
    name = "single"

    def setup(self):
        cfg, shards = self.config, self.ctx.shards
        self.x = tf.constant(shards.x[0])
        self.y = tf.constant(shards.y[0].astype(np.int32))
        self.eval_x = tf.constant(shards.eval_x)
        self.eval_y = tf.constant(shards.eval_y.astype(np.int32))
        self.model = get_model(cfg.model_spec(), seed=cfg.seed)
        variables = self.model.trainable_variables
        self.optimizer = MomentumSGD(variables, cfg.learning_rate, cfg.momentum)

        @tf.function
        def step(indices):
            x, y = tf.gather(self.x, indices), tf.gather(self.y, indices)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, self.model(x, training=True))
            self.optimizer.apply(tape.gradient(loss, variables))
            return loss

        @tf.function
        def evaluate():
            return top1(self.eval_y, self.model(self.eval_x, training=False))

        self._step, self._evaluate = step, evaluate

    def train_step(self, step: int) -> float:
        indices = batch_indices_for(self.config, self.ctx.shards, step)[0]
        return float(self._step(tf.constant(indices)))

    def evaluate(self) -> float:
        return float(self._evaluate())

    def trainable_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]

    def describe(self):
        return {"plan": "single", "cut_layer": None}
