"""A strategy that exists only for a test: everything adding one takes (issue 14).

This module and the one ``register`` call in tests/demo_strategy_spec.py are the whole
change: the settings, the rank layout, the launchers, the rows and the report read the
spec. The strategy is sync PS with a tree step: the workers' gradients are averaged on
worker 0, which pushes one gradient per variable to its PS task (W-1 gradients cross to
worker 0 instead of W to the PS). Same arithmetic as sync PS, so the same weights.
"""
import tensorflow as tf

from strategies.base import loss_fn
from strategies.ps import InGraphStrategy, dense


class ReduceOnWorker0(InGraphStrategy):
    name = "ps-reduce0"

    def setup(self):
        self.place_data()
        self.build_model()
        variables = self.model.trainable_variables
        workers = self.ctx.worker_devices

        @tf.function
        def step(indices):
            per_worker, losses = [], []
            for w, device in enumerate(workers):
                with tf.device(device):
                    x, y = self.worker_batch(w, indices)
                    with tf.GradientTape() as tape:
                        loss = loss_fn(y, self.model(x, training=True))
                    per_worker.append(tape.gradient(loss, variables))
                    losses.append(loss)
            with tf.device(workers[0]):
                averaged = [tf.add_n([dense(g) for g in grads]) / len(workers) for grads in zip(*per_worker)]
            self.optimizer.apply(averaged)
            return tf.add_n(losses) / len(workers)

        self._step = step
        self.setup_eval()

    def describe(self):
        return {"plan": self.name, "cut_layer": None}
