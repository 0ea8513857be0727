"""A user's own CNN, brought to ralp-bench without editing the zoo (README, "Bring your own model").

    ralp-bench run --model examples/custom_cnn.py:build --strategy ps,horovod,ralp --dataset mnist

Any function returning a built functional or Sequential ``tf.keras.Model`` with logits out
works; ralp-bench passes ``input_shape=``/``num_classes=`` when the function takes them
(from --input-shape/--classes), so one function serves several data sets.
"""
import tensorflow as tf


def build(input_shape=(28, 28, 1), num_classes=10):
    """Two conv blocks and a two-layer FC head: most parameters in the head, like AlexNet."""
    inputs = tf.keras.Input(shape=input_shape, name="image")
    x = tf.keras.layers.Conv2D(16, 5, padding="same", activation="relu", name="conv1")(inputs)
    x = tf.keras.layers.MaxPooling2D(2, name="pool1")(x)
    x = tf.keras.layers.Conv2D(32, 5, padding="same", activation="relu", name="conv2")(x)
    x = tf.keras.layers.MaxPooling2D(2, name="pool2")(x)
    x = tf.keras.layers.Flatten(name="flatten")(x)
    x = tf.keras.layers.Dense(256, activation="relu", name="fc1")(x)
    outputs = tf.keras.layers.Dense(num_classes, name="logits")(x)
    return tf.keras.Model(inputs, outputs, name="custom_cnn")
