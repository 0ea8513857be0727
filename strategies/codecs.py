"""Codecs for tensors that cross the network in distributed training (activations, gradients).

RALP's traffic is the activations a worker sends to the parameter server and the activation
gradients it gets back; compressing them trades accuracy for bytes. Each codec is written in
TensorFlow ops so that, inside one tf.function, ``encode`` runs on the sending device and ``decode``
on the receiving one: only the payload tensors cross the link, and ``wire_bytes`` says how many
bytes that is (for fp32 inputs), which the cost model uses without running anything.

Specs (``get_codec``): ``none`` (fp32 as is), ``fp16`` (half precision, saturating at +-65504),
``int8`` (symmetric per-tensor scale max|t|/127, sent as one fp32 scalar), ``topk:<fraction>`` (the
k = max(1, ceil(fraction * n)) largest-magnitude entries as fp32 values + int32 flat indices; k is
capped at n so an empty tensor sends nothing). Top-k drops most of each tensor, so it is meant to be
wrapped in ``ErrorFeedback``, which carries what was dropped into the next step.

``Transport`` is what the strategies use: it places encode on the sending device and decode on the
receiving one, wraps top-k in error feedback, and sends fp16 as ``ScaledFloat16`` (a per-tensor
scale, so the tiny gradients of a batch-averaged loss do not underflow).
"""
from fractions import Fraction

import tensorflow as tf

from bench.core.errors import UserError
from ralp.codec_spec import VALID_SPECS, CodecSpec, parse_codec

FP16_MAX = 65504.0


def _shape_tensor(shape):
    """A tf.int32 shape vector from a TensorShape, list/tuple or tensor (scalars give [])."""
    if isinstance(shape, tf.TensorShape):
        shape = shape.as_list()
    if isinstance(shape, (list, tuple)):
        return tf.constant([int(d) for d in shape], dtype=tf.int32, shape=[len(shape)])
    return tf.cast(shape, tf.int32)


class Codec:
    """Encode a tensor into the payload that is sent; decode the payload back into a tensor."""

    name = "codec"
    ratio = 1.0  # wire bytes / fp32 bytes for large tensors

    def encode(self, t):
        """Tuple of payload tensors that cross the link."""
        raise NotImplementedError

    def decode(self, payload, shape, dtype):
        """Tensor of ``shape`` and ``dtype`` rebuilt from ``payload``."""
        raise NotImplementedError

    def wire_bytes(self, num_elements):
        """Bytes of the payload for an fp32 tensor of ``num_elements`` elements."""
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class NoCompression(Codec):
    """fp32 as is: the baseline every other codec is measured against."""

    name = "none"
    ratio = 1.0

    def encode(self, t):
        return (tf.cast(t, tf.float32),)

    def decode(self, payload, shape, dtype):
        return tf.cast(tf.reshape(payload[0], _shape_tensor(shape)), dtype)

    def wire_bytes(self, num_elements):
        return 4 * int(num_elements)


class Float16(Codec):
    """Half precision: 2 bytes per element, relative error about 5e-4; saturates instead of inf."""

    name = "fp16"
    ratio = 0.5

    def encode(self, t):
        clipped = tf.clip_by_value(tf.cast(t, tf.float32), -FP16_MAX, FP16_MAX)
        return (tf.cast(clipped, tf.float16),)

    def decode(self, payload, shape, dtype):
        return tf.cast(tf.reshape(payload[0], _shape_tensor(shape)), dtype)

    def wire_bytes(self, num_elements):
        return 2 * int(num_elements)


class ScaledFloat16(Float16):
    """Half precision after a per-tensor scale (max|t| maps to 2**14), sent as one fp32 scalar.

    Plain fp16 flushes gradients below 6e-5 to subnormals (absolute step 6e-8) and below 3e-8
    to zero; the gradients of a loss averaged over a batch are mostly that small, so they lose
    several percent (the reason mixed-precision training scales the loss). With the scale every
    entry down to max|t| * 4e-9 keeps fp16's full relative precision (<= 4.9e-4), and nothing
    saturates. 2 bytes per element + 4 per tensor. Used where one sender owns a tensor (the
    in-graph strategies); a ring all-reduce sums fp16 values of different ranks, so Horovod
    uses the plain cast.
    """

    name = "fp16"
    ratio = 0.5
    TOP = 2.0 ** 14

    def encode(self, t):
        x = tf.cast(t, tf.float32)
        unit = tf.maximum(tf.reduce_max(tf.abs(x)), 0.0) / self.TOP  # 0 for an empty or all-zero tensor
        half = tf.cast(tf.clip_by_value(tf.math.divide_no_nan(x, unit), -FP16_MAX, FP16_MAX), tf.float16)
        return half, unit

    def decode(self, payload, shape, dtype):
        half, unit = payload
        return tf.cast(tf.reshape(tf.cast(half, tf.float32) * unit, _shape_tensor(shape)), dtype)

    def wire_bytes(self, num_elements):
        return 2 * int(num_elements) + 4


class Int8(Codec):
    """Symmetric linear quantization, scale = max|t| / 127; absolute error <= scale / 2.

    An all-zero (or empty) tensor has scale 0 and decodes to zeros, never NaN.
    """

    name = "int8"
    ratio = 0.25

    def encode(self, t):
        x = tf.cast(t, tf.float32)
        scale = tf.maximum(tf.reduce_max(tf.abs(x)), 0.0) / 127.0
        q = tf.clip_by_value(tf.round(tf.math.divide_no_nan(x, scale)), -127.0, 127.0)
        return tf.cast(q, tf.int8), scale

    def decode(self, payload, shape, dtype):
        q, scale = payload
        return tf.cast(tf.reshape(tf.cast(q, tf.float32) * scale, _shape_tensor(shape)), dtype)

    def wire_bytes(self, num_elements):
        return int(num_elements) + 4


class TopK(Codec):
    """The k largest-magnitude entries (fp32 values, int32 flat indices); the rest decode to zero."""

    def __init__(self, fraction):
        self.fraction = Fraction(str(fraction))  # exact, so ceil(0.1 * 30) is 3, not 4
        if not 0 < self.fraction <= 1:
            raise UserError(f"top-k fraction {fraction} must be in (0, 1]; valid codecs: {VALID_SPECS}")
        self.name = f"topk:{fraction}"
        self.ratio = float(2 * self.fraction)

    def k(self, num_elements):
        """max(1, ceil(fraction * n)), capped at n (0 for an empty tensor): ralp/codec_spec.py's rule."""
        return CodecSpec("topk", self.fraction).k(num_elements)

    def encode(self, t):
        flat = tf.reshape(tf.cast(t, tf.float32), [-1])
        n = flat.shape[0]
        if n is not None:
            k = self.k(n)
        else:  # same formula in integer ops: ceil(p*n/q) = (p*n + q - 1) // q
            n = tf.size(flat)
            p, q = self.fraction.numerator, self.fraction.denominator
            k = tf.minimum(n, tf.maximum(1, (p * n + q - 1) // q))
        _, indices = tf.math.top_k(tf.abs(flat), k=k, sorted=False)
        return tf.gather(flat, indices), indices

    def decode(self, payload, shape, dtype):
        values, indices = payload
        shape = _shape_tensor(shape)
        size = tf.reshape(tf.reduce_prod(shape), [1])
        dense = tf.scatter_nd(tf.expand_dims(indices, 1), values, size)
        return tf.cast(tf.reshape(dense, shape), dtype)

    def wire_bytes(self, num_elements):
        return 8 * self.k(num_elements)


class ErrorFeedback:
    """Error feedback around a lossy codec: what was not sent this step is added to the next step.

    For each tensor key a residual tf.Variable (fp32, same shape) is created on first use, on the
    device of the tensor (or the device scope the call runs under). ``encode(t, key)`` sends
    ``codec.encode(t + residual)`` and stores ``residual = (t + residual) - decoded`` (the sender
    decodes its own payload to know what the receiver will see). Summed over steps, the decoded
    outputs equal the summed inputs minus the current residual, so nothing is lost, only delayed;
    this is what keeps top-k SGD converging. Create the wrapper outside any tf.function and call
    ``encode`` for a given key from one tf.function (variables are created on its first trace).
    """

    def __init__(self, codec):
        self.codec = codec
        self.name = f"{codec.name}+ef"
        self.ratio = codec.ratio
        self._residuals = {}

    def residual(self, key):
        return self._residuals[key]

    def _residual_for(self, key, t):
        if key in self._residuals:
            variable = self._residuals[key]
            if variable.shape != t.shape:
                raise ValueError(f"error-feedback key {key!r} was {variable.shape}, now {t.shape}")
            return variable
        if not t.shape.is_fully_defined():
            raise ValueError(f"error feedback needs a static shape for {key!r}, got {t.shape}")
        device = t.device
        if not device and not tf.executing_eagerly():
            device = tf.identity(t).device  # a symbolic input has no device: take the caller's scope
        # Created eagerly (init_scope) on that device: inside a tf.function a variable would
        # otherwise be lifted out of the function and lose the device scope.
        with tf.init_scope(), tf.device(device or None):
            variable = tf.Variable(tf.zeros(t.shape, tf.float32), trainable=False,
                                   name=f"residual_{len(self._residuals)}")
        self._residuals[key] = variable
        return variable

    def encode(self, t, key, device=None):
        """Payload of ``t + residual``; ``device`` (default: t's) is where the residual lives."""
        t = tf.convert_to_tensor(t)
        if device is not None:
            with tf.device(device):
                t = tf.identity(t)  # carries the device, so the residual is created there
        residual = self._residual_for(key, t)
        corrected = tf.cast(t, tf.float32) + residual
        payload = self.codec.encode(corrected)
        residual.assign(corrected - self.codec.decode(payload, t.shape, tf.float32))
        return payload

    def decode(self, payload, shape, dtype):
        return self.codec.decode(payload, shape, dtype)

    def wire_bytes(self, num_elements):
        return self.codec.wire_bytes(num_elements)

    def reset(self):
        for variable in self._residuals.values():
            variable.assign(tf.zeros_like(variable))


class Transport:
    """Moves tensors from one device to another through a codec, inside one tf.function.

    ``send(t, sender, receiver, key)`` encodes under ``tf.device(sender)`` and decodes under
    ``tf.device(receiver)``, so the payload is the only tensor that crosses the link. Top-k is
    wrapped in ``ErrorFeedback`` (one residual per ``key``, on the sender); ``none`` is the
    identity, adding no op, so uncompressed runs stay bit-identical to code without a codec.
    ``sparse_ok=False`` (activations) sends top-k tensors uncompressed: what top-k drops from
    an activation is not delayed but lost, and error feedback across steps has no meaning for
    tensors of different images. Create it outside tf.function (error feedback creates variables).
    """

    def __init__(self, spec):
        self.codec = get_codec(spec)
        if type(self.codec) is Float16:
            self.codec = ScaledFloat16()
        self.lossless = isinstance(self.codec, NoCompression)
        self.sparse = isinstance(self.codec, TopK)
        self.feedback = ErrorFeedback(self.codec) if self.sparse else None

    @property
    def name(self):
        return self.codec.name

    def applies(self, sparse_ok=True):
        """Whether ``send`` would compress (and so change the tensor)."""
        return not self.lossless and (sparse_ok or not self.sparse)

    def encode(self, t, sender, key=None):
        """Payload of ``t`` built on ``sender`` (error feedback keyed by ``key`` for top-k)."""
        with tf.device(sender):
            if self.feedback is not None:
                return self.feedback.encode(t, key, device=sender)
            return self.codec.encode(t)

    def send(self, t, sender, receiver, key=None, sparse_ok=True):
        """``t`` as the receiver sees it: encoded on ``sender``, decoded on ``receiver``."""
        if not self.applies(sparse_ok):
            return t
        t = tf.convert_to_tensor(t)
        payload = self.encode(t, sender, key)
        with tf.device(receiver):
            return self.codec.decode(payload, t.shape, t.dtype)


def get_codec(spec):
    """Codec for ``spec`` (parsed by ralp/codec_spec.py, the one parser); UserError listing valid forms."""
    if isinstance(spec, (Codec, ErrorFeedback)):
        return spec
    parsed = parse_codec(spec)
    if parsed.kind == "topk":
        return TopK(parsed.text[5:])
    return {"none": NoCompression, "fp16": Float16, "int8": Int8}[parsed.kind]()
