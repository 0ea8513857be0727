"""CPU-sized models that keep the property the mission is about.

The FC-heavy nets (AlexNet-like, VGG-like, LeNet-like) carry most of their
parameters in the FC head, so a parameter server must move them every step;
the small ResNet ends in global pooling, so almost nothing sits in its head.
No dropout: every strategy must compute bit-comparable updates from a seed.
"""
import tensorflow as tf

from bench.models.imagenet import _conv, _fc_head

layers = tf.keras.layers


def alexnet_cifar(input_shape, num_classes):
    """~3.5 M parameters, ~90% in FC 2048-1024-1024-classes."""
    return tf.keras.Sequential([
        layers.InputLayer(input_shape=input_shape, name="images"),
        _conv(64, 5, "conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        _conv(128, 5, "conv2"),
        layers.MaxPooling2D(2, name="pool2"),
        _conv(128, 3, "conv3"),
        layers.MaxPooling2D(2, name="pool3"),
        *_fc_head([1024, 1024], num_classes, 4),
    ], name="alexnet_cifar")


def vgg_cifar(input_shape, num_classes):
    """~6.4 M parameters, ~82% in FC 4096-1024-1024-classes."""
    stack = [layers.InputLayer(input_shape=input_shape, name="images")]
    for b, filters in enumerate([64, 128, 256], start=1):
        stack += [_conv(filters, 3, f"block{b}_conv1"), _conv(filters, 3, f"block{b}_conv2"),
                  layers.MaxPooling2D(2, name=f"block{b}_pool")]
    return tf.keras.Sequential(stack + _fc_head([1024, 1024], num_classes, 1), name="vgg_cifar")


def lenet_mnist(input_shape, num_classes):
    """~1.66 M parameters, ~97% in FC 3136-512-classes."""
    return tf.keras.Sequential([
        layers.InputLayer(input_shape=input_shape, name="images"),
        _conv(32, 5, "conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        _conv(64, 5, "conv2"),
        layers.MaxPooling2D(2, name="pool2"),
        *_fc_head([512], num_classes, 3),
    ], name="lenet_mnist")


def _residual_block(x, filters, stride, name):
    shortcut = x
    y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv1")(x)
    y = layers.BatchNormalization(name=f"{name}_bn1")(y)
    y = layers.ReLU(name=f"{name}_relu1")(y)
    y = layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{name}_conv2")(y)
    y = layers.BatchNormalization(name=f"{name}_bn2")(y)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False, name=f"{name}_proj")(shortcut)
        shortcut = layers.BatchNormalization(name=f"{name}_proj_bn")(shortcut)
    y = layers.Add(name=f"{name}_add")([y, shortcut])
    return layers.ReLU(name=f"{name}_out")(y)


def resnet_cifar(input_shape, num_classes):
    """Three residual stages (32-64-128), global average pooling, one FC layer."""
    inputs = layers.Input(shape=input_shape, name="images")
    x = layers.Conv2D(32, 3, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.BatchNormalization(name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for stage, (filters, stride) in enumerate([(32, 1), (64, 2), (128, 2)], start=1):
        x = _residual_block(x, filters, stride, f"stage{stage}")
    x = layers.GlobalAveragePooling2D(name="global_pool")(x)
    logits = layers.Dense(num_classes, name="logits")(x)
    return tf.keras.Model(inputs, logits, name="resnet_cifar")
