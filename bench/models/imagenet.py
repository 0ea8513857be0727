"""ImageNet-shaped reference models, matching the published parameter counts.

AlexNet and VGG are plain ``Sequential`` stacks (every layer boundary is a
possible cut). ResNet-50 and Inception-v3 come from Keras applications; they
are functional graphs where the only boundary one tensor crosses near the top
is global pooling, which is exactly why splitting them pays nothing.
"""
import tensorflow as tf

layers = tf.keras.layers


def _conv(filters, kernel, name, strides=1, padding="same"):
    return layers.Conv2D(filters, kernel, strides=strides, padding=padding, activation="relu", name=name)


def _fc_head(widths, num_classes, first_index):
    head = [layers.Flatten(name="flatten")]
    for i, width in enumerate(widths):
        head.append(layers.Dense(width, activation="relu", name=f"fc{first_index + i}"))
    head.append(layers.Dense(num_classes, name="logits"))
    return head


def alexnet(input_shape, num_classes):
    """torchvision layout: 61,100,840 parameters at 1000 classes; 6x6x256 = 9,216 floats into fc6."""
    return tf.keras.Sequential([
        layers.InputLayer(input_shape=input_shape, name="images"),
        layers.ZeroPadding2D(2, name="pad1"),
        _conv(64, 11, "conv1", strides=4, padding="valid"),
        layers.MaxPooling2D(3, 2, name="pool1"),
        _conv(192, 5, "conv2"),
        layers.MaxPooling2D(3, 2, name="pool2"),
        _conv(384, 3, "conv3"),
        _conv(256, 3, "conv4"),
        _conv(256, 3, "conv5"),
        layers.MaxPooling2D(3, 2, name="pool5"),
        *_fc_head([4096, 4096], num_classes, 6),
    ], name="alexnet")


def _vgg(name, blocks, input_shape, num_classes):
    stack = [layers.InputLayer(input_shape=input_shape, name="images")]
    for b, (filters, repeats) in enumerate(blocks, start=1):
        for r in range(1, repeats + 1):
            stack.append(_conv(filters, 3, f"block{b}_conv{r}"))
        stack.append(layers.MaxPooling2D(2, 2, name=f"block{b}_pool"))
    return tf.keras.Sequential(stack + _fc_head([4096, 4096], num_classes, 1), name=name)


def vgg16(input_shape, num_classes):
    """138,357,544 parameters at 1000 classes; 7x7x512 = 25,088 floats into fc1."""
    return _vgg("vgg16", [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)], input_shape, num_classes)


def vgg19(input_shape, num_classes):
    return _vgg("vgg19", [(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)], input_shape, num_classes)


def _application_with_head(app, name, input_shape, num_classes):
    """A Keras application backbone, global average pooling, then one FC layer.

    The backbone's layers are inlined into one functional graph (not nested),
    so the profiler sees every convolution and its cut points.
    """
    backbone = app(include_top=False, weights=None, input_shape=input_shape, pooling="avg")
    logits = layers.Dense(num_classes, name="logits")(backbone.output)
    return tf.keras.Model(backbone.input, logits, name=name)


def resnet50(input_shape, num_classes):
    """Keras applications layout: 25,636,712 parameters (torchvision's is 25,557,032)."""
    return _application_with_head(tf.keras.applications.ResNet50, "resnet50", input_shape, num_classes)


def inception3(input_shape, num_classes):
    """Keras applications layout, no auxiliary head: 23,851,784 parameters."""
    return _application_with_head(tf.keras.applications.InceptionV3, "inception3", input_shape, num_classes)
