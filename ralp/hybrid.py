"""Hybrid placement (``ralp-hybrid``): the conv tower data-parallel, its gradients ring-all-reduced
among the workers; the FC head on the PS, fed by activations; optionally the head sharded over
the S PS tasks (``--ps S``, ralp/sharded_head.py) and each batch pipelined in micro-batches.

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

Pipelining (``--micro-batches m``): each worker's batch is cut into m micro-batches, each taken
through tower forward, activations up, head forward and backward over all W workers' micro-batch,
activation gradients down and tower backward, the gradients summed over the micro-batches;
then one ring all-reduce and one update. Nothing orders micro-batch j+1 after micro-batch j,
so TensorFlow's executor computes the next tower forward while the previous activations travel
and the head works. Each micro-batch's loss is the mean over its W x B/m images, scaled by
1/m, so the summed gradients are the full batch's: the same update as without pipelining
(batch normalization in the tower, if any, would see micro-batch statistics instead).
"""
import numpy as np
import tensorflow as tf

from baselines.ps import dense
from bench.optim import MomentumSGD
from bench.strategy import top1
from ralp.cut import split_model
from ralp.placement import LayerPlacement
from ralp.ring import ring_allreduce
from ralp.sharded_head import ShardedHead


class HybridPlacement(LayerPlacement):
    """RALP's tower pass (ralp/placement.py) with replicated towers, a ring, and the head on one
    PS task (Keras, any head) or sharded over all of them (a Dense chain)."""
    name = "ralp-hybrid"

    def setup(self):
        self.place_data()
        # The head, and the towers' initial values, on the PS; the head's optimizer below (the
        # tower's variables there are never updated, so they get no momentum buffers).
        self.build_model(optimizer=False)
        workers, ps = self.ctx.worker_devices, self.ctx.ps_devices
        tower, self.head = split_model(self.model, self.ctx.cut)
        self.sharded = ShardedHead(self.head, ps) if len(ps) > 1 else None
        self.replicas = []
        for device in workers:
            with tf.device(device):
                replica = tf.keras.models.clone_model(tower)
            replica.set_weights(tower.get_weights())
            self.replicas.append(replica)
        # Map the model's trainable variables to replica 0's, for the weights this strategy reports.
        self.tower_index = {id(v): i for i, v in enumerate(tower.trainable_variables)}
        self.head_vars = self.sharded.variables if self.sharded else self.head.trainable_variables
        self.head_optimizer = MomentumSGD(self.head_vars, self.config.learning_rate, self.config.momentum)
        self.tower_optimizers = [MomentumSGD(r.trainable_variables, self.config.learning_rate,
                                             self.config.momentum) for r in self.replicas]
        self._step = tf.function(self.step_graph)

        @tf.function
        def evaluate():
            with tf.device(workers[0]):
                features = self.replicas[0](self.eval_x, training=False)
                logits = self.sharded.logits(features) if self.sharded else self.head(features, training=False)
                return top1(self.eval_y, logits)

        self._evaluate = evaluate

    def step_graph(self, indices):
        """One step: m micro-batches through towers and head (nothing orders one after the
        other, so the executor overlaps them), the tower gradients' ring, both updates."""
        workers, m = self.ctx.worker_devices, self.config.micro_batches
        rows = self.config.batch_size // m
        tower_grads, head_grads, losses = [None] * len(workers), None, []
        for j in range(m):
            part = [i[j * rows:(j + 1) * rows] for i in indices]
            tapes, activations, labels = self.tower_pass(self.replicas, part)
            loss, grads, returned = self.head_on_ps(activations, labels, self.head_vars, 1.0 / m)
            losses.append(loss)
            head_grads = grads if head_grads is None else _add_on(self.head_vars, head_grads, grads)
            for w, device in enumerate(workers):
                variables = self.replicas[w].trainable_variables
                with tf.device(device):
                    g = [dense(x) for x in tapes[w].gradient(activations[w], variables, output_gradients=returned[w])]
                tower_grads[w] = g if tower_grads[w] is None else _add_on(variables, tower_grads[w], g)
        shapes = [v.shape for v in self.replicas[0].trainable_variables]
        fused = []
        for w, device in enumerate(workers):
            with tf.device(device):
                fused.append(tf.concat([tf.reshape(g, [-1]) for g in tower_grads[w]], axis=0))
        summed = ring_allreduce(fused, workers)  # the mean over W·B is already in the loss
        for w, device in enumerate(workers):
            with tf.device(device):
                pieces = tf.split(summed[w], [int(np.prod(s)) for s in shapes])
                self.tower_optimizers[w].apply([tf.reshape(p, s) for p, s in zip(pieces, shapes)])
        self.head_optimizer.apply(head_grads)
        with tf.device(self.ctx.ps_devices[0]):
            return tf.add_n(losses) / m

    def head_on_ps(self, activations, labels, head_vars, scale):
        """One pass of the head over every worker's (micro-)batch: (loss, head gradients, each
        worker's activation gradient on that worker), gradients scaled by ``scale``. Only
        activations (sharded: each task's feature slice) travel up, uncompressed."""
        workers = self.ctx.worker_devices
        if self.sharded is None:
            loss, grads, per_worker = self.head_pass(activations, labels, head_vars)
            if scale != 1.0:
                with tf.device(self.ctx.ps_devices[0]):
                    grads = [g * scale for g in grads]
                    per_worker = [g * scale for g in per_worker]
            returned = []
            for w, device in enumerate(workers):
                with tf.device(device):
                    returned.append(tf.identity(per_worker[w]))
            return loss, grads, returned
        slices = []
        for w, device in enumerate(workers):
            with tf.device(device):
                slices.append(self.sharded.slices(activations[w]))
        loss, grads, per_worker = self.sharded.train_pass(slices, labels, scale)
        returned = []
        for w, device in enumerate(workers):
            with tf.device(device):
                returned.append(tf.reshape(tf.concat(per_worker[w], axis=1), tf.shape(activations[w])))
        return loss, grads, returned

    def trainable_weights(self):
        replica = self.replicas[0].trainable_variables
        head = {}
        if self.sharded:
            for layer in self.head.layers:
                if type(layer).__name__ == "Dense":
                    head.update(zip(map(id, layer.trainable_variables), self.sharded.weights_of(layer)))
        return [replica[self.tower_index[id(v)]].numpy() if id(v) in self.tower_index
                else head[id(v)] if id(v) in head else v.numpy()
                for v in self.model.trainable_variables]

    def describe(self):
        return dict(super().describe(), head_shards=len(self.ctx.ps_devices),
                    micro_batches=self.config.micro_batches)


def _add_on(variables, totals, grads):
    """Running sums of gradients, each added where its variable lives."""
    out = []
    for v, total, g in zip(variables, totals, grads):
        with tf.device(v.device):
            out.append(total + g)
    return out
