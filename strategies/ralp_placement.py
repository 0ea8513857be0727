"""The RALP strategy: conv tower on the workers, FC head on the parameter server.

Given the analyzer's cut, the model is split into a tower (layers up to the
cut) and a head. Tower variables live on the PS as in sync PS (workers pull
them and push their gradients: 8·P_conv bytes per worker per step); head
variables live on PS task 0, which runs the head once over the activations of
all W workers. Workers send B·A activation floats up and receive B·A
activation-gradient floats back, instead of the head's parameters.

With synchronous SGD the update equals the one sync PS computes: the head
sees the same W·B images in one batch, and the mean loss over W·B images
back-propagates exactly the averaged gradient to each tower replica.

With ``--compression`` every tensor that crosses a link goes through the codec:
activations (worker -> PS), activation gradients (PS -> worker) and tower
gradients (worker -> PS); tower parameters are pulled in fp32. Top-k applies to
the tower gradients only (with error feedback on the worker): sparsifying
activations loses, rather than delays, what it drops, so they travel in fp32.
"""
import tensorflow as tf

from ralp.cut import layer_chain, split_model
from strategies.base import loss_fn
from strategies.codecs import Transport
from strategies.ps import InGraphStrategy, dense


class LayerPlacement(InGraphStrategy):
    name = "ralp"

    def setup(self):
        self.place_data()
        self.build_model()
        cut = self.ctx.cut
        self.tower, self.head = split_model(self.model, cut)
        tower_vars = self.tower.trainable_variables
        head_vars = self.head.trainable_variables
        order = {id(v): i for i, v in enumerate(self.model.trainable_variables)}
        workers, ps0 = self.ctx.worker_devices, self.ctx.ps_devices[0]

        transport = self.transport = Transport(self.config.compression)

        @tf.function
        def step(indices):
            tapes, activations, labels = self.tower_pass([self.tower] * len(workers), indices)
            # Activations up (encoded on each worker, decoded on the PS): the head tape starts
            # from the decoded tensor, so no gradient ever flows through a codec.
            received = [transport.send(a, workers[w], ps0, sparse_ok=False) for w, a in enumerate(activations)]
            loss, head_grads, per_worker_grad = self.head_pass(received, labels, head_vars)
            tower_grads = []
            for w, device in enumerate(workers):
                returned = transport.send(per_worker_grad[w], ps0, device, sparse_ok=False)
                with tf.device(device):
                    tower_grads.append(tapes[w].gradient(activations[w], tower_vars, output_gradients=returned))
            summed = []
            for i, (v, grads) in enumerate(zip(tower_vars, zip(*tower_grads))):
                pushed = [transport.send(dense(g), workers[w], v.device, key=(w, i)) for w, g in enumerate(grads)]
                with tf.device(v.device):
                    summed.append(tf.add_n(pushed))  # the mean over W·B is already in joined_grad
            pairs = sorted(zip(tower_vars + head_vars, summed + list(head_grads)), key=lambda p: order[id(p[0])])
            self.optimizer.apply([g for _, g in pairs])
            return loss

        self._step = step
        self.setup_eval()

    def tower_pass(self, towers, indices):
        """Each worker's tower forward on its batch, taped: (tapes, activations, labels)."""
        tapes, activations, labels = [], [], []
        for w, device in enumerate(self.ctx.worker_devices):
            with tf.device(device):
                x, y = self.worker_batch(w, indices)
                with tf.GradientTape() as tape:
                    activations.append(towers[w](x, training=True))
                tapes.append(tape)
                labels.append(y)
        return tapes, activations, labels

    def head_pass(self, received, labels, head_vars):
        """The head on PS task 0 over all workers' activations at once: (loss, head gradients,
        each worker's activation gradient, still on the PS). The activation gradient is
        computed first (``chain_backward``) where the head is a chain of layers."""
        with tf.device(self.ctx.ps_devices[0]):
            joined = tf.concat(received, axis=0)
            labels = tf.concat(labels, axis=0)
            layers = layer_chain(self.head)
            if layers is not None:
                loss, head_grads, joined_grad = chain_backward(layers, joined, labels, head_vars)
            else:
                with tf.GradientTape() as head_tape:
                    head_tape.watch(joined)
                    loss = loss_fn(labels, self.head(joined, training=True))
                head_grads, joined_grad = head_tape.gradient(loss, [head_vars, joined])
            return loss, head_grads, tf.split(joined_grad, len(received), axis=0)

    def describe(self):
        return {"plan": self.name, "cut_layer": self.ctx.cut}


def chain_backward(layers, x, labels, variables):
    """(loss, gradients of ``variables``, gradient of ``x``) of the loss of ``layers`` applied in turn
    to ``x``, the gradient of ``x`` first: every weight gradient's ops wait for it (a control edge).

    Why: the workers wait for the activations' gradient; the head's weight gradients only feed the
    PS's own update, which can run beside the workers' backward (the cost model prices it so, as
    ``BESIDE``). Differentiated whole, TensorFlow's executor runs both kinds of op at once on the
    PS's cores, and the activations' gradient is done only when nearly the whole head backward is:
    AlexNet at 8 workers on 0.22-core hosts spent 4.5 s between the activations' arrival and their
    gradients' departure against the 2.9 s of the input-gradient chain (per-host CPU and link
    sampled every 0.25 s, 2026-12-07). Taken one layer at a time (each layer's input gradient, then
    after the last of them each layer's weight gradients, from the same upstream gradient), the ops
    and their inputs are those of the whole backward, so the result is the same."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        outputs = [x]
        for layer in layers:
            outputs.append(layer(outputs[-1], training=True))
        loss = loss_fn(labels, outputs[-1])
    upstream = {len(layers): tape.gradient(loss, outputs[-1])}  # the loss's gradient at outputs[i]
    for i in reversed(range(len(layers))):
        upstream[i] = tape.gradient(outputs[i + 1], outputs[i], output_gradients=upstream[i + 1])
    grads = {}
    with tf.control_dependencies([upstream[0]]):
        for i, layer in enumerate(layers):
            own = layer.trainable_variables
            if own:
                grads.update(zip(map(id, own), tape.gradient(outputs[i + 1], own, output_gradients=upstream[i + 1])))
    return loss, [grads[id(v)] for v in variables], upstream[0]
