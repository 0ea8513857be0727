"""Synchronous parameter-server training, as vanilla TensorFlow does it.

Variables live on the PS task(s) (sharded greedily by size when --ps > 1).
Each step, every worker reads all parameters from the PS, runs the whole
model forward and backward on its shard of the batch, and sends its
gradients back; the PS averages them and applies one update. Every worker
therefore moves 4P bytes in and 4P bytes out per step, and the PS link carries
8·P·W: the traffic RALP is designed to remove.

With ``--compression`` each worker's gradient is encoded on the worker and
decoded on the variable's PS task before the average (top-k with error
feedback: the residual lives on the worker); parameter pulls stay fp32.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from strategies.base import Strategy, batch_indices_for, loss_fn, top1, variables_on_ps
from strategies.codecs import Transport
from strategies.optim import MomentumSGD


def dense(gradient):
    """A gradient as a dense tensor (codecs work on dense tensors; IndexedSlices from gathers)."""
    return tf.convert_to_tensor(gradient)


class InGraphStrategy(Strategy):
    """Shared by the in-graph TF strategies (sync PS and RALP): one client
    drives every task; workers keep their data shard resident on their device."""

    def place_data(self):
        ctx = self.ctx
        self.data_x, self.data_y = [], []
        for w, device in enumerate(ctx.worker_devices):
            with tf.device(device):
                self.data_x.append(tf.Variable(ctx.shards.x[w], trainable=False, name=f"shard{w}_x"))
                self.data_y.append(tf.Variable(ctx.shards.y[w].astype(np.int32), trainable=False,
                                               name=f"shard{w}_y"))
        with tf.device(ctx.worker_devices[0]):
            self.eval_x = tf.Variable(ctx.shards.eval_x, trainable=False, name="eval_x")
            self.eval_y = tf.Variable(ctx.shards.eval_y.astype(np.int32), trainable=False, name="eval_y")

    def build_model(self, optimizer: bool = True):
        """The model's variables on the PS tasks; with ``optimizer``, momentum SGD over all of them
        (a strategy that updates only some of them here builds its own)."""
        with variables_on_ps(self.ctx.ps_devices):
            self.model = get_model(self.config.model_spec(), seed=self.config.seed)
        if optimizer:  # outside the placement rule: each momentum buffer sits beside its variable
            self.optimizer = MomentumSGD(self.model.trainable_variables, self.config.learning_rate,
                                         self.config.momentum)

    def worker_batch(self, w, indices):
        return tf.gather(self.data_x[w], indices[w]), tf.gather(self.data_y[w], indices[w])

    def train_step(self, step: int) -> float:
        indices = [tf.constant(i) for i in batch_indices_for(self.config, self.ctx.shards, step)]
        return float(self._step(indices))

    def evaluate(self) -> float:
        return float(self._evaluate())

    def setup_eval(self):
        @tf.function
        def evaluate():
            with tf.device(self.ctx.worker_devices[0]):
                return top1(self.eval_y, self.model(self.eval_x, training=False))
        self._evaluate = evaluate

    def trainable_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]


class SyncPS(InGraphStrategy):
    name = "ps"

    def setup(self):
        self.place_data()
        self.build_model()
        self.transport = Transport(self.config.compression)
        variables = self.model.trainable_variables
        workers = self.ctx.worker_devices

        @tf.function
        def step(indices):
            per_worker_grads, losses = [], []
            for w, device in enumerate(workers):
                with tf.device(device):
                    x, y = self.worker_batch(w, indices)
                    with tf.GradientTape() as tape:
                        loss = loss_fn(y, self.model(x, training=True))
                    per_worker_grads.append(tape.gradient(loss, variables))
                    losses.append(loss)
            averaged = []
            for i, (v, grads) in enumerate(zip(variables, zip(*per_worker_grads))):
                pushed = [self.transport.send(dense(g), workers[w], v.device, key=(w, i))
                          for w, g in enumerate(grads)]
                with tf.device(v.device):
                    averaged.append(tf.add_n(pushed) / len(workers))
            self.optimizer.apply(averaged)
            with tf.device(self.ctx.ps_devices[0]):
                return tf.add_n(losses) / len(workers)

        self._step = step
        self.setup_eval()
