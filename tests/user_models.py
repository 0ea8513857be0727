"""Models written the way users write them: no layer is named by hand, so Keras numbers every
layer per process (``flatten``, then ``flatten_1`` in a second build). ralp-bench must identify
them by what they are (tests/test_model_matrix.py runs each under every strategy)."""
import tensorflow as tf
from tensorflow.keras.layers import Conv2D, Dense, Flatten, GlobalAveragePooling2D, Input, MaxPooling2D


def build_sequential():
    """The issue's report, verbatim: a LeNet-like Sequential stack on 28x28x1."""
    return tf.keras.Sequential([Input((28, 28, 1)), Conv2D(8, 3, activation="relu"), MaxPooling2D(),
                                Conv2D(16, 3, activation="relu"), MaxPooling2D(), Flatten(),
                                Dense(256, activation="relu"), Dense(10)])


def build_functional(input_shape=(28, 28, 1), num_classes=10):
    """A functional graph with a residual branch (its add is no cut point) and an FC head."""
    inputs = Input(input_shape)
    x = Conv2D(8, 3, padding="same", activation="relu")(inputs)
    y = Conv2D(8, 3, padding="same", activation="relu")(x)
    x = tf.keras.layers.add([x, y])
    x = MaxPooling2D()(x)
    x = Flatten()(x)
    x = Dense(64, activation="relu")(x)
    return tf.keras.Model(inputs, Dense(num_classes)(x))


def build_pooled(input_shape=(28, 28, 1), num_classes=10):
    """Global pooling into one Dense: the head RALP would move is a single small layer."""
    inputs = Input(input_shape)
    x = Conv2D(16, 3, activation="relu")(inputs)
    x = GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, Dense(num_classes)(x))


def build_all_conv(input_shape=(28, 28, 1), num_classes=10):
    """No Dense layer at all: no strategy that moves a head can split it (a one-line refusal)."""
    inputs = Input(input_shape)
    x = Conv2D(num_classes, 3)(inputs)
    return tf.keras.Model(inputs, GlobalAveragePooling2D()(x))
