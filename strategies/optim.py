"""SGD with momentum, written out so every strategy applies the same update.

Keras' optimizer creates its slot variables wherever the current device
scope says; written here, each momentum buffer is created on, and updated
on, the device of its variable (the PS task that owns it), and the PS,
Horovod, RALP and single-process reference trainers share one formula:
    m <- momentum * m + g ;  w <- w - lr * m
"""
import tensorflow as tf


class MomentumSGD:
    def __init__(self, variables, learning_rate: float, momentum: float):
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.variables = list(variables)
        self.slots = []
        for v in self.variables:
            with tf.device(v.device):
                self.slots.append(tf.Variable(tf.zeros_like(v), trainable=False,
                                              name=v.name.split(":")[0] + "/momentum"))

    def apply(self, grads):
        """Apply one update; each op runs where its variable lives."""
        for v, m, g in zip(self.variables, self.slots, grads):
            with tf.device(v.device):
                m.assign(self.momentum * m + g)
                v.assign_sub(self.learning_rate * m)
