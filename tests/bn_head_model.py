"""A model whose head is not a plain Dense chain (batch normalization between two Dense layers):
ralp-hybrid can split it but not shard its head (tests/test_bad_input.py)."""
import tensorflow as tf


def build():
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.InputLayer(input_shape=(16, 16, 3), name="images"),
        layers.Conv2D(8, 3, activation="relu", name="conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        layers.Flatten(name="flatten"),
        layers.Dense(32, activation="relu", name="fc1"),
        layers.BatchNormalization(name="fc1_bn"),
        layers.Dense(10, name="logits"),
    ], name="bn_head")
