"""The hybrid's sharded head (strategies/sharded_head.py) against Keras' own head: same loss, same
gradients for every slice of every layer, same activation gradients, for heads ending in a
row-split (3 Dense layers) and a column-split (2 Dense layers) layer, over 1 to 3 tasks;
and refusals for heads that are not a Dense chain."""
import numpy as np
import pytest


def _head(model_name):
    cut = "global_pool" if model_name == "resnet_cifar" else "flatten"
    from bench.models import get_model
    from ralp.cut import split_model

    return split_model(get_model(model_name, seed=0), cut)


@pytest.mark.parametrize("model_name, shards", [("alexnet_cifar", 2), ("alexnet_cifar", 3), ("lenet_mnist", 1),
                                                ("lenet_mnist", 2), ("lenet_mnist", 3), ("resnet_cifar", 2)])
def test_sharded_head_computes_the_unsharded_gradients(model_name, shards):
    import tensorflow as tf

    from strategies.base import loss_fn
    from strategies.sharded_head import ShardedHead

    tower, head = _head(model_name)
    rng = np.random.default_rng(shards)
    batch = [tf.constant(rng.standard_normal((5,) + tuple(tower.output_shape[1:])).astype(np.float32))
             for _ in range(2)]  # two workers' activations
    labels = [tf.constant(rng.integers(0, 10, 5).astype(np.int32)) for _ in range(2)]
    joined = tf.concat(batch, axis=0)
    with tf.GradientTape() as tape:
        tape.watch(joined)
        loss = loss_fn(tf.concat(labels, axis=0), head(joined, training=True))
    keras_grads, keras_input_grad = tape.gradient(loss, [head.trainable_variables, joined])

    sharded = ShardedHead(head, ["/cpu:0"] * shards)
    ours, grads, per_worker = sharded.train_pass([sharded.slices(x) for x in batch], labels, scale=0.5)
    assert abs(float(ours) - float(loss)) < 1e-6
    by_id = dict(zip(map(id, sharded.variables), grads))
    for layer in [l for l in head.layers if type(l).__name__ == "Dense"]:
        shard = next(s for s in sharded.layers if s.layer is layer)
        kernel = np.concatenate([by_id[id(k)].numpy() for k in shard.kernels], axis=shard.axis)
        bias = (np.concatenate([by_id[id(b)].numpy() for b in shard.biases]) if shard.axis == 1
                else by_id[id(shard.biases[0])].numpy())
        expected = dict(zip(map(id, head.trainable_variables), keras_grads))
        np.testing.assert_allclose(kernel, 0.5 * expected[id(layer.kernel)].numpy(), rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(bias, 0.5 * expected[id(layer.bias)].numpy(), rtol=1e-4, atol=1e-7)
        np.testing.assert_array_equal(np.concatenate(shard.full_weights()[0:1]), layer.kernel.numpy())
    rows = np.concatenate([tf.concat(p, axis=1).numpy() for p in per_worker])
    np.testing.assert_allclose(rows, 0.5 * keras_input_grad.numpy(), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(sharded.logits(joined).numpy(), head(joined).numpy(), rtol=1e-5, atol=1e-5)
    # the PS tasks' inbound activation slices add up to the activations, each at most a ceil share
    assert sum(sharded.in_sizes) == int(np.prod(tower.output_shape[1:]))
    assert max(sharded.in_sizes) - min(sharded.in_sizes) <= 1


def test_the_sharded_heads_weight_gradients_wait_for_its_input_gradient():
    """As the unsharded head orders its backward (tests/test_hybrid.py): on every task, each weight
    gradient waits for that task's slice of the activations' gradient (a control edge), which the
    workers wait for; without the edge the executor runs both kinds of matmul at once."""
    import tensorflow as tf

    from strategies.sharded_head import ShardedHead
    from tests.graph_walk import ancestors

    tower, head = _head("alexnet_cifar")
    sharded = ShardedHead(head, ["/cpu:0"] * 2)
    inputs = sharded.slices(tf.zeros((5,) + tuple(tower.output_shape[1:])))

    def backward():
        logits, saved = sharded.forward(inputs)
        return sharded.backward(tf.ones_like(logits), saved)

    traced = tf.function(backward).get_concrete_function()
    made = [out.op.inputs[0].op if out.op.type == "Identity" else out.op for out in traced.outputs]
    n = len(sharded.variables)
    weight_gradients, input_gradient = made[:n], made[n:]
    assert len(input_gradient) == 2
    task_of = {id(v): s for layer in sharded.layers for s, pair in enumerate(zip(layer.kernels, layer.biases))
               for v in pair if v is not None}
    for variable, op in zip(sharded.variables, weight_gradients):
        assert input_gradient[task_of[id(variable)]] in ancestors([op]), variable.name


def test_a_head_that_is_not_a_dense_chain_is_refused():
    import tensorflow as tf

    from bench.core.errors import UserError
    from strategies.sharded_head import ShardedHead

    inputs = tf.keras.Input((8,))
    x = tf.keras.layers.Dense(4, activation="relu")(inputs)
    x = tf.keras.layers.BatchNormalization(name="head_bn")(x)
    head = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x), name="bn_head")
    with pytest.raises(UserError, match="BatchNormalization.*use --ps 1"):
        ShardedHead(head, ["/cpu:0"] * 2)
    tanh = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(3, activation="tanh")], name="tanh_head")
    with pytest.raises(UserError, match="tanh"):
        ShardedHead(tanh, ["/cpu:0"] * 2)
