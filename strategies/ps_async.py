"""TensorFlow's own asynchronous PS training: ParameterServerStrategy + ClusterCoordinator.

This is the row TF users get out of the box: the chief schedules step
functions on whichever worker is free, each worker pulls the variables,
computes gradients on its own batch and applies them on the PS without
waiting for the others (stale updates; no averaging). One "step" here is one
round of W scheduled functions (W·B images), so images/sec compares directly
with the synchronous strategies; only the total time of the timed rounds is
meaningful, as steps overlap.

Input: PSS gives every worker the same ``input_pipeline_id`` (0), so a worker
cannot pick a shard; as in TF's tutorial, each worker shuffles the whole
training set with its own random order. The momentum buffers come from
Keras' SGD, which PSS colocates with their variables.
"""
import time
from typing import List

import numpy as np
import tensorflow as tf

from bench.models import get_model
from strategies.base import Strategy, loss_fn, top1


class AsyncPS(Strategy):
    name = "ps-async"
    per_step_timing = False
    connects_to_cluster = False  # ParameterServerStrategy connects the chief by itself

    def setup(self):
        cfg, shards = self.config, self.ctx.shards
        self.strategy = tf.distribute.ParameterServerStrategy(self.ctx.extra["resolver"])
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        with self.strategy.scope():
            self.model = get_model(cfg.model_spec(), seed=cfg.seed)
            self.optimizer = tf.keras.optimizers.SGD(cfg.learning_rate, momentum=cfg.momentum)
            self.optimizer.build(self.model.trainable_variables)
        train_x = np.concatenate(shards.x)
        train_y = np.concatenate(shards.y).astype(np.int32)

        def dataset_fn(_input_context):
            data = tf.data.Dataset.from_tensor_slices((train_x, train_y))
            return data.shuffle(len(train_y)).repeat().batch(cfg.batch_size, drop_remainder=True).prefetch(2)

        per_worker = self.coordinator.create_per_worker_dataset(
            self.strategy.distribute_datasets_from_function(dataset_fn))
        self.iterator = iter(per_worker)
        variables = self.model.trainable_variables

        @tf.function
        def worker_step(iterator):
            def replica_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, self.model(x, training=True))
                self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
                return loss
            return self.strategy.run(replica_step, args=next(iterator))

        self._worker_step = worker_step
        self.eval_x = tf.constant(shards.eval_x)
        self.eval_y = tf.constant(shards.eval_y.astype(np.int32))

    def train_steps(self, first_step: int, count: int) -> List[float]:
        """Schedule count·W updates, wait for all; one loss per round."""
        start = time.perf_counter()
        results = [self.coordinator.schedule(self._worker_step, args=(self.iterator,))
                   for _ in range(count * self.config.workers)]
        self.coordinator.join()
        self.elapsed = time.perf_counter() - start
        losses = [float(r.fetch()) for r in results]
        w = self.config.workers
        return [float(np.mean(losses[i * w:(i + 1) * w])) for i in range(count)]

    def train_step(self, step: int) -> float:
        return self.train_steps(step, 1)[0]

    def evaluate(self) -> float:
        # Runs on the chief with the current PS variables (read over the network).
        return float(top1(self.eval_y, self.model(self.eval_x, training=False)))

    def trainable_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]
