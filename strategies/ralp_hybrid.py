"""Hybrid placement (``ralp-hybrid``): the conv tower data-parallel, its gradients ring-all-reduced
among the workers; the FC head on the PS, fed by activations; optionally the head sharded over
the S PS tasks (``--ps S``, strategies/sharded_head.py) and each batch pipelined in micro-batches.

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
so the replicas stay bitwise identical.

Buckets (``--hybrid-bucket-mb``, as Horovod overlaps its all-reduce with the backward pass): the
tower's gradients are summed by one ring per bucket, a bucket being whole layers in backward
order, about that many MiB of fp32 gradients (strategies/ring.py ``buckets``; 0: one fused ring, as
before). A bucket's ring reads only its own layers' gradients, and nothing else orders it
(no concat of all gradients, and the ring's ops are stateless, so tf.function adds no control
edge), so TensorFlow's executor starts it as soon as the backward has passed those layers:
the last layers' gradients travel while the first layers' backward still runs. Sums are
elementwise and independent of the bucketing, so with 2 workers bucketed and fused runs
are bitwise identical (beyond 2, the order of the ring's additions differs per element).

Codecs (``--compression fp16`` or ``int8``, strategies/codecs.py through ``Transport``): the
activations go up and their gradients come down encoded (fp16 with a per-tensor scale), and
every ring hop carries the codec's payload, summed in fp32 on the receiver (strategies/ring.py says
why, and how the replicas stay identical). A sharded head's PS-to-PS partial sums stay fp32.
Top-k is refused (ralp/strategy_costs.py ``CODECS_OF``).

Pipelining (``--micro-batches m``): each worker's batch is cut into m micro-batches, each taken
through tower forward, activations up, head forward and backward over all W workers' micro-batch,
activation gradients down and tower backward, the gradients summed over the micro-batches;
then the rings and one update. A bucket's ring waits for its layers' sum over all m
micro-batches, so it overlaps the rest of the last micro-batch's backward (and whatever other
micro-batch work is still in flight), not the earlier ones. Nothing orders micro-batch j+1
after micro-batch j, so TensorFlow's executor computes the next tower forward while the previous activations travel
and the head works. Each micro-batch's loss is the mean over its W x B/m images, scaled by
1/m, so the summed gradients are the full batch's: the same update as without pipelining
(batch normalization in the tower, if any, would see micro-batch statistics instead).
"""
import numpy as np
import tensorflow as tf

from ralp.buckets import MIB, buckets
from ralp.cut import split_model
from strategies.base import top1
from strategies.codecs import Transport
from strategies.optim import MomentumSGD
from strategies.ps import dense
from strategies.ralp_placement import LayerPlacement
from strategies.ring import ring_allreduce
from strategies.sharded_head import ShardedHead


class HybridPlacement(LayerPlacement):
    """RALP's tower pass (strategies/ralp_placement.py) with replicated towers, a ring, and the head on one
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
        self.buckets = gradient_buckets(self.replicas[0], self.config.hybrid_bucket_mb * MIB)
        self.transport = Transport(self.config.compression)
        if self.transport.sparse:  # bench/core/config.py refuses it with the fix; this guards direct use
            raise ValueError("ralp-hybrid's ring takes stateless codecs only (CODECS_OF)")
        self.ring_codec = self.transport.codec if self.transport.applies() else None
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
        other, so the executor overlaps them), the tower gradients' rings, both updates."""
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
        summed = self.allreduce(tower_grads)  # the mean over W·B is already in the loss
        for w in range(len(workers)):
            self.tower_optimizers[w].apply(summed[w])
        self.head_optimizer.apply(head_grads)
        with tf.device(self.ctx.ps_devices[0]):
            return tf.add_n(losses) / m

    def allreduce(self, tower_grads):
        """Every worker's tower gradients summed over the workers, per worker in variable order:
        one ring per bucket over its gradients laid end to end, each under the name scope
        ``ring_bucket<b>`` (b = 0 holds the last layers)."""
        workers = self.ctx.worker_devices
        shapes = [v.shape for v in self.replicas[0].trainable_variables]
        summed = [[None] * len(shapes) for _ in workers]
        for b, bucket in enumerate(self.buckets):
            with tf.name_scope(f"ring_bucket{b}"):
                laid = []
                for w, device in enumerate(workers):
                    with tf.device(device):
                        laid.append(tf.concat([tf.reshape(tower_grads[w][i], [-1]) for i in bucket], axis=0))
                rung = ring_allreduce(laid, workers, self.ring_codec)
                for w, device in enumerate(workers):
                    with tf.device(device):
                        pieces = tf.split(rung[w], [int(np.prod(shapes[i])) for i in bucket])
                        for i, piece in zip(bucket, pieces):
                            summed[w][i] = tf.reshape(piece, shapes[i])
        return summed

    def head_on_ps(self, activations, labels, head_vars, scale):
        """One pass of the head over every worker's (micro-)batch: (loss, head gradients, each
        worker's activation gradient on that worker), gradients scaled by ``scale``. Only
        activations (sharded: each task's feature slice) travel up, through the codec, and
        their gradients down."""
        workers, send = self.ctx.worker_devices, self.transport.send
        if self.sharded is None:
            ps0 = self.ctx.ps_devices[0]
            received = [send(a, workers[w], ps0, sparse_ok=False) for w, a in enumerate(activations)]
            loss, grads, per_worker = self.head_pass(received, labels, head_vars)
            if scale != 1.0:
                with tf.device(ps0):
                    grads = [g * scale for g in grads]
                    per_worker = [g * scale for g in per_worker]
            returned = []
            for w, device in enumerate(workers):
                back = send(per_worker[w], ps0, device, sparse_ok=False)
                with tf.device(device):
                    returned.append(tf.identity(back))
            return loss, grads, returned
        tasks = self.ctx.ps_devices
        slices = []
        for w, device in enumerate(workers):
            with tf.device(device):
                mine = self.sharded.slices(activations[w])
            slices.append([send(sl, device, tasks[s], sparse_ok=False) for s, sl in enumerate(mine)])
        loss, grads, per_worker = self.sharded.train_pass(slices, labels, scale)
        returned = []
        for w, device in enumerate(workers):
            back = [send(g, tasks[s], device, sparse_ok=False) for s, g in enumerate(per_worker[w])]
            with tf.device(device):
                returned.append(tf.reshape(tf.concat(back, axis=1), tf.shape(activations[w])))
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
                    micro_batches=self.config.micro_batches, ring_buckets=len(self.buckets))


def gradient_buckets(tower, cap_bytes):
    """The rings' buckets over ``tower``'s trainable variables: lists of variable indices (into
    ``tower.trainable_variables``), each bucket whole layers (strategies/ring.py ``buckets``, on each
    layer's fp32 gradient bytes), bucket 0 the last layers. Variables no layer owns, if any,
    count as one more layer before the first."""
    variables = tower.trainable_variables
    index = {id(v): i for i, v in enumerate(variables)}
    layers, seen = [], set()
    for layer in tower.layers:
        mine = [index[id(v)] for v in layer.trainable_variables if id(v) in index]
        mine = [i for i in mine if i not in seen]  # a shared layer's variables: its first use
        if mine:
            layers.append(mine)
            seen.update(mine)
    rest = [i for i in range(len(variables)) if i not in seen]
    if rest:
        layers.insert(0, rest)
    sizes = [sum(4 * int(np.prod(variables[i].shape)) for i in layer) for layer in layers]
    return [[i for k in group for i in layers[k]] for group in buckets(sizes, cap_bytes)]


def _add_on(variables, totals, grads):
    """Running sums of gradients, each added where its variable lives."""
    out = []
    for v, total, g in zip(variables, totals, grads):
        with tf.device(v.device):
            out.append(total + g)
    return out
