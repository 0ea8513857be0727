"""The hybrid placement's FC head sharded over S PS tasks, model-parallel (``ralp-hybrid --ps S``).

Why this design: the head sits on the PS to save the workers from shipping its parameters,
but then one PS host receives every worker's activations and runs the head for all W x B
images, so its link and its CPU bound the step as W grows. Splitting the *batch* over S
head replicas would divide both but make the PS hosts all-reduce the head's gradients every
step: 2(S-1)/S x 4 P_head bytes per PS link, which for an FC-heavy head (VGG-16: 124 M
parameters, ~1 GB per step) costs more than it saves. Splitting the *layers' matrices* moves
only activations between PS hosts, which for a head are W x B x (a few thousand) floats.

So each head Dense layer is split across the S tasks, alternating the axis as Megatron-LM
does for transformer MLPs: layer 0 by input rows (input features), layer 1 by output
columns, layer 2 by rows again, and so on.
- Layer 0 row-split: each worker flattens its activations and sends feature slice s to
  PS s (the PS link's inbound bytes divide by S, the worker still sends each float once);
  PS s multiplies its slice by its rows of the kernel, giving a partial sum of the full
  output; the partial sums are ring-all-reduced among the PS tasks (strategies/ralp_hybrid.py's ring),
  so every task holds the layer's full output (bias added once, on task 0's partial).
- Layer 1 column-split: every task has the full input, computes its columns, applies the
  activation to its slice; no communication: the next row-split layer consumes exactly
  this slice. Its backward pass produces partial input gradients, all-reduced the same way.
- The last layer: row-split, its partial logits are summed on task 0; column-split, task 0
  concatenates the logit slices. The loss is taken on task 0.
Each task stores and updates 1/S of every matrix; the rows x kernel and columns x kernel
products (forward and backward) divide by S; the elementwise activation of a row-split
layer's output is repeated on every task (cheap). Only plain chains of Dense layers (relu
or linear, optionally after Flatten) can be sharded this way; anything else is refused.

The backward pass is written out (dense layers and relu are two lines each) so that every
product runs on the task that holds its slice; the gradients equal the unsharded head's,
which the tests check against Keras' own.
"""
from typing import List

import numpy as np
import tensorflow as tf

from bench.core.errors import UserError
from strategies.base import loss_fn
from strategies.ring import near_equal_sizes, ring_allreduce

ACTIVATIONS = ("relu", "linear")


def dense_chain(head) -> List["tf.keras.layers.Dense"]:
    """The head's Dense layers when it is a plain chain (Flatten allowed before the first);
    one line naming what stops it otherwise."""
    dense = []
    for layer in head.layers:
        kind = type(layer).__name__
        if kind == "InputLayer" or (kind == "Flatten" and not dense):
            continue
        if kind != "Dense":
            raise UserError(f"the head of {head.name} has a {kind} layer ({layer.name!r}); a sharded head "
                            "(ralp-hybrid with --ps > 1) needs a plain chain of Dense layers; use --ps 1")
        activation = tf.keras.activations.serialize(layer.activation)
        if activation not in ACTIVATIONS:
            raise UserError(f"Dense layer {layer.name!r} uses {activation}; a sharded head supports "
                            f"{' and '.join(ACTIVATIONS)}; use --ps 1")
        dense.append(layer)
    if not dense or len(head.outputs) != 1:
        raise UserError(f"the head of {head.name} is not a chain of Dense layers ending in the logits; use --ps 1")
    return dense


class _ShardedLayer:
    """One Dense layer's slices: kernel rows (``axis`` 0) or columns (``axis`` 1) per task."""

    def __init__(self, layer, devices, axis):
        self.layer, self.axis = layer, axis
        self.relu = tf.keras.activations.serialize(layer.activation) == "relu"
        kernel = layer.kernel.numpy()
        self.sizes = near_equal_sizes(kernel.shape[axis], len(devices))
        bias = layer.bias.numpy() if layer.use_bias else None
        self.kernels, self.biases = [], []
        for s, (device, part) in enumerate(zip(devices, np.split(kernel, np.cumsum(self.sizes)[:-1], axis))):
            with tf.device(device):
                self.kernels.append(tf.Variable(part, name=f"{layer.name}_shard{s}_kernel"))
                if bias is None:
                    self.biases.append(None)
                elif axis == 1:  # column slices carry their slice of the bias
                    cols = np.split(bias, np.cumsum(self.sizes)[:-1])[s]
                    self.biases.append(tf.Variable(cols, name=f"{layer.name}_shard{s}_bias"))
                else:  # rows: the whole bias, once, on task 0 (added to its partial sum)
                    self.biases.append(tf.Variable(bias, name=f"{layer.name}_bias") if s == 0 else None)

    def variables(self):
        return [v for pair in zip(self.kernels, self.biases) for v in pair if v is not None]

    def full_weights(self) -> List[np.ndarray]:
        """(kernel, bias) as the unsharded layer holds them."""
        kernel = np.concatenate([k.numpy() for k in self.kernels], axis=self.axis)
        if not self.layer.use_bias:
            return [kernel]
        bias = np.concatenate([b.numpy() for b in self.biases]) if self.axis == 1 else self.biases[0].numpy()
        return [kernel, bias]


class ShardedHead:
    """The head's Dense chain over ``devices`` (one per PS task); see the module docstring."""

    def __init__(self, head, devices: List[str]):
        self.devices = list(devices)
        self.layers = [_ShardedLayer(layer, self.devices, i % 2) for i, layer in enumerate(dense_chain(head))]
        self.in_sizes = self.layers[0].sizes  # feature slices of the activations, one per task

    @property
    def variables(self):
        return [v for layer in self.layers for v in layer.variables()]

    def weights_of(self, layer) -> List[np.ndarray]:
        """The unsharded (kernel, bias) of the Keras Dense ``layer``."""
        return next(s.full_weights() for s in self.layers if s.layer is layer)

    def slices(self, activations: tf.Tensor) -> List[tf.Tensor]:
        """A worker's activations flattened and cut into the tasks' feature slices (on the worker)."""
        flat = tf.reshape(activations, [tf.shape(activations)[0], -1])
        return tf.split(flat, self.in_sizes, axis=1)

    def _allreduce(self, partials):
        """The sum of the tasks' partial tensors, on every task. Each reshape runs on its own task:
        an op left unplaced lands on the chief's host and drags the tensor there and back."""
        vectors = []
        for device, p in zip(self.devices, partials):
            with tf.device(device):
                vectors.append(tf.reshape(p, [-1]))
        flat = ring_allreduce(vectors, self.devices)
        shape = tf.shape(partials[0])
        out = []
        for device, vector in zip(self.devices, flat):
            with tf.device(device):
                out.append(tf.reshape(vector, shape))
        return out

    def forward(self, inputs: List[tf.Tensor]):
        """``inputs[s]``: task s's feature slice of every worker's activations (rows stacked).
        Returns (logits on task 0, what the backward pass needs)."""
        saved, current, S = [], list(inputs), len(self.devices)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            outs = []
            for s, device in enumerate(self.devices):
                with tf.device(device):
                    z = tf.matmul(current[s], layer.kernels[s])
                    if layer.biases[s] is not None:
                        z = z + layer.biases[s]
                    outs.append(z)
            if layer.axis == 0 and i != last:       # partial sums -> the full output on every task
                outs = self._allreduce(outs)
            elif layer.axis == 0:                   # partial logits -> summed on task 0
                with tf.device(self.devices[0]):
                    outs = [tf.add_n(outs)] * S
            elif i == last:                         # logit columns -> concatenated on task 0
                with tf.device(self.devices[0]):
                    outs = [tf.concat(outs, axis=1)] * S
            saved.append((current, outs))
            if layer.relu:
                acts = []
                for s, device in enumerate(self.devices):
                    with tf.device(device):
                        acts.append(tf.nn.relu(outs[s]))
                outs = acts
            current = outs
        return current[0], saved

    def backward(self, logits_grad, saved):
        """Gradients of every sharded variable (``self.variables`` order) and each task's slice of
        the activations' gradient, from the logits' gradient on task 0. The activations' gradient
        comes first: a task's weight gradients wait for its slice of it (a control edge), for the
        reason ``strategies/ralp_placement.py``'s ``chain_backward`` orders the unsharded head so:
        the workers wait for it, the weight gradients only feed the PS's own update."""
        S, last = len(self.devices), len(self.layers) - 1
        deferred = []   # per layer: (layer, its per-task inputs, the per-task gradients of its output)
        upstream = None  # per task: the gradient of the layer's output (full or its slice)
        for i in range(last, -1, -1):
            layer = self.layers[i]
            inputs, outs = saved[i]
            if i == last:  # the logits' gradient goes from task 0 to every task (rows) or its slice (cols)
                if layer.axis == 0:
                    upstream = [logits_grad] * S
                else:
                    with tf.device(self.devices[0]):
                        upstream = tf.split(logits_grad, layer.sizes, axis=1)
            dzs, partial_inputs = [], []
            for s, device in enumerate(self.devices):
                with tf.device(device):
                    dz = upstream[s]
                    if layer.relu:
                        dz = tf.where(outs[s] > 0, dz, tf.zeros_like(dz))
                    dzs.append(dz)
                    partial_inputs.append(tf.matmul(dz, layer.kernels[s], transpose_b=True))
            deferred.append((layer, inputs, dzs))
            # row-split: each task holds the gradient of its own input slice; column-split: partial
            # sums of the full input's gradient, all-reduced (every task needs it for the layer below)
            upstream = partial_inputs if layer.axis == 0 else self._allreduce(partial_inputs)
        grads = {}
        for s, device in enumerate(self.devices):
            with tf.device(device), tf.control_dependencies([upstream[s]]):
                for layer, inputs, dzs in deferred:
                    grads[id(layer.kernels[s])] = tf.matmul(inputs[s], dzs[s], transpose_a=True)
                    if layer.biases[s] is not None:
                        grads[id(layer.biases[s])] = tf.reduce_sum(dzs[s], axis=0)
        return [grads[id(v)] for v in self.variables], upstream

    def train_pass(self, slices_per_worker, labels, scale: float = 1.0):
        """One pass over every worker's rows: (loss on task 0, variable gradients, and per worker
        its activation gradient's slices, still on the tasks). ``slices_per_worker[w][s]``."""
        inputs, rows = [], [int(x.shape[0]) for x in (sl[0] for sl in slices_per_worker)]
        for s, device in enumerate(self.devices):
            with tf.device(device):
                inputs.append(tf.concat([sl[s] for sl in slices_per_worker], axis=0))
        logits, saved = self.forward(inputs)
        with tf.device(self.devices[0]):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                loss = loss_fn(tf.concat(labels, axis=0), logits)
            logits_grad = tape.gradient(loss, logits)
            if scale != 1.0:  # a micro-batch's share of the batch's mean loss
                logits_grad = logits_grad * scale
        grads, input_grads = self.backward(logits_grad, saved)
        per_worker = []
        for s, device in enumerate(self.devices):
            with tf.device(device):
                per_worker.append(tf.split(input_grads[s], rows, axis=0))
        return loss, grads, [[per_worker[s][w] for s in range(len(self.devices))] for w in range(len(rows))]

    def logits(self, activations):
        """Inference on one device's activations (evaluation; traffic does not matter there)."""
        out = tf.reshape(activations, [tf.shape(activations)[0], -1])
        for layer in self.layers:
            kernel = tf.concat(layer.kernels, axis=layer.axis)
            out = tf.matmul(out, kernel)
            if layer.layer.use_bias:
                out = out + (tf.concat(layer.biases, axis=0) if layer.axis == 1 else layer.biases[0])
            if layer.relu:
                out = tf.nn.relu(out)
        return out
