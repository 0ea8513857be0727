"""Hybrid placement (``ralp-hybrid``): the conv tower data-parallel, its gradients ring-all-reduced
among the workers; the FC head on PS task 0, fed by activations.

Why: RALP as in the paper keeps the tower's variables on the PS, so the PS link carries
W x 8 P_tower bytes of tower parameters and gradients per step on top of the activations;
that term grows with W and is why the analyzer prefers Horovod for VGG-16 at 8 workers. Here
each worker keeps its own replica of the tower and the replicas stay identical because each
applies the same summed gradient; the sum travels worker to worker in a ring (reduce-scatter
then all-gather, 2(W-1)/W x 4 P_tower bytes each way per worker), so the PS link carries the
activations up and their gradients down and nothing else.

The ring is built in the same TensorFlow graph as the rest of the step (one client drives
every task, as for sync PS and RALP): each hop is a tensor produced on one worker and
consumed on the next, which TensorFlow's runtime sends directly between those two workers.
Horovod's own collective cannot join this graph (it runs one program per worker); the ring's
traffic and sums are the same as Horovod's ring all-reduce of one fused buffer.

The update equals single-process SGD on W x B images: the head sees all W x B activations in
one batch, the mean loss sends each worker exactly its share of the gradient, and the ring
sums the shares. Every chunk of the sum is computed once and copied to the other workers,
so the replicas stay bitwise identical. Codecs are not supported yet (``--compression none``).
"""
from typing import List

import numpy as np
import tensorflow as tf

from baselines.ps import dense
from bench.optim import MomentumSGD
from bench.strategy import top1
from ralp.cut import split_model
from ralp.placement import LayerPlacement


def ring_allreduce(vectors: List[tf.Tensor], devices: List[str]) -> List[tf.Tensor]:
    """The sum of equally long 1-D ``vectors`` (one per device), returned on every device.

    Reduce-scatter: at hop s, device w sends its partial chunk (w - s) mod W to device w+1,
    which adds its own; after W-1 hops device w holds the full chunk (w + 1) mod W.
    All-gather: at hop s, device w forwards full chunk (w + 1 - s) mod W to device w+1."""
    W = len(devices)
    if W == 1:
        return list(vectors)
    n = int(vectors[0].shape[0])
    sizes = [n // W + (1 if i < n % W else 0) for i in range(W)]
    partial = []
    for w, device in enumerate(devices):
        with tf.device(device):
            partial.append(list(tf.split(vectors[w], sizes)))
    for s in range(W - 1):
        hop = [list(p) for p in partial]
        for w in range(W):
            c, dst = (w - s) % W, (w + 1) % W
            with tf.device(devices[dst]):
                hop[dst][c] = partial[dst][c] + partial[w][c]
        partial = hop
    full = [{(w + 1) % W: partial[w][(w + 1) % W]} for w in range(W)]
    for s in range(W - 1):
        for w in range(W):
            c, dst = (w + 1 - s) % W, (w + 1) % W
            with tf.device(devices[dst]):
                full[dst][c] = tf.identity(full[w][c])
    out = []
    for w, device in enumerate(devices):
        with tf.device(device):
            out.append(tf.concat([full[w][c] for c in range(W)], axis=0))
    return out


class HybridPlacement(LayerPlacement):
    """RALP's tower and head passes (ralp/placement.py) with replicated towers and a ring."""
    name = "ralp-hybrid"

    def setup(self):
        self.place_data()
        # The head, and the towers' initial values, on the PS; the head's optimizer below (the
        # tower's variables there are never updated, so they get no momentum buffers).
        self.build_model(optimizer=False)
        workers = self.ctx.worker_devices
        tower, self.head = split_model(self.model, self.ctx.cut)
        self.replicas = []
        for device in workers:
            with tf.device(device):
                replica = tf.keras.models.clone_model(tower)
            replica.set_weights(tower.get_weights())
            self.replicas.append(replica)
        # Map the model's trainable variables to replica 0's, for the weights this strategy reports.
        self.tower_index = {id(v): i for i, v in enumerate(tower.trainable_variables)}
        head_vars = self.head.trainable_variables
        self.head_optimizer = MomentumSGD(head_vars, self.config.learning_rate, self.config.momentum)
        self.tower_optimizers = [MomentumSGD(r.trainable_variables, self.config.learning_rate,
                                             self.config.momentum) for r in self.replicas]
        shapes = [v.shape for v in tower.trainable_variables]
        sizes = [int(np.prod(s)) for s in shapes]

        @tf.function
        def step(indices):
            tapes, activations, labels = self.tower_pass(self.replicas, indices)
            # activations up, uncompressed: the PS link's only inbound bytes
            loss, head_grads, per_worker_grad = self.head_pass(activations, labels, head_vars)
            fused = []
            for w, device in enumerate(workers):
                with tf.device(device):
                    grads = tapes[w].gradient(activations[w], self.replicas[w].trainable_variables,
                                              output_gradients=tf.identity(per_worker_grad[w]))
                    fused.append(tf.concat([tf.reshape(dense(g), [-1]) for g in grads], axis=0))
            summed = ring_allreduce(fused, workers)  # the mean over W·B is already in joined_grad
            for w, device in enumerate(workers):
                with tf.device(device):
                    pieces = tf.split(summed[w], sizes)
                    self.tower_optimizers[w].apply([tf.reshape(p, s) for p, s in zip(pieces, shapes)])
            self.head_optimizer.apply(head_grads)
            return loss

        self._step = step

        @tf.function
        def evaluate():
            with tf.device(workers[0]):
                logits = self.head(self.replicas[0](self.eval_x, training=False), training=False)
                return top1(self.eval_y, logits)

        self._evaluate = evaluate

    def trainable_weights(self):
        replica = self.replicas[0].trainable_variables
        return [replica[self.tower_index[id(v)]].numpy() if id(v) in self.tower_index else v.numpy()
                for v in self.model.trainable_variables]
