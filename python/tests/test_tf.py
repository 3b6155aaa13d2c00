"""convjit.tf and convjit.keras: the op library against tf.raw_ops, gradients through
GradientTape, and a Keras model trained with convjit's layers against Keras' own. The op
library is built once per test session into a private directory (a minute on a busy machine)."""

import os
import random
import zlib

import numpy as np
import pytest

from conftest import optional_module

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = optional_module("tensorflow")
pytestmark = pytest.mark.skipif(tf is None, reason="TensorFlow is not installed")

if tf is not None:
    import convjit.tf as ctf

DTYPES = ["float32", "float64", "bfloat16", "float16"]
TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "bfloat16": 3e-2, "float16": 3e-3}


def _case(rng, depthwise):
    n, h, w, c = rng.randint(1, 3), rng.randint(4, 9), rng.randint(4, 9), rng.randint(1, 5)
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    o = rng.randint(1, 3) if depthwise else rng.randint(1, 6)
    sh = rng.randint(1, 2)
    sw = sh if depthwise else rng.randint(1, 2)
    # TensorFlow's depthwise CPU kernels take no dilation (its reference cannot check them).
    dilate = (sh, sw) == (1, 1) and not depthwise
    dh, dw = (rng.randint(1, 2), rng.randint(1, 2)) if dilate else (1, 1)
    pad = rng.choice(["VALID", "SAME", "EXPLICIT"])
    ph, pw = (rng.randint(0, 2), rng.randint(0, 2)) if pad == "EXPLICIT" else (0, 0)
    return (n, h, w, c), (kh, kw, c, o), (sh, sw), (dh, dw), pad, (ph, pw)


def _attrs(fmt, s, d, pad, p):
    if fmt == "NHWC":
        strides, dilations = [1, s[0], s[1], 1], [1, d[0], d[1], 1]
        explicit = [0, 0, p[0], p[0], p[1], p[1], 0, 0] if pad == "EXPLICIT" else []
    else:
        strides, dilations = [1, 1, s[0], s[1]], [1, 1, d[0], d[1]]
        explicit = [0, 0, 0, 0, p[0], p[0], p[1], p[1]] if pad == "EXPLICIT" else []
    return dict(strides=strides, padding=pad, explicit_paddings=explicit, data_format=fmt,
                dilations=dilations)


def _dilate(filter, d):
    """The filter with zeros between its taps: TensorFlow's CPU gradient kernels refuse
    dilations, and a dilated convolution is the plain one with this filter (differentiable, so
    the tape gives the filter gradient at the taps)."""
    if d == (1, 1):
        return filter
    kh, kw, c, o = filter.shape
    spread = tf.pad(tf.reshape(filter, (kh, 1, kw, 1, c, o)),
                    [[0, 0], [0, d[0] - 1], [0, 0], [0, d[1] - 1], [0, 0], [0, 0]])
    return tf.reshape(spread, (kh * d[0], kw * d[1], c, o))[:(kh - 1) * d[0] + 1,
                                                           :(kw - 1) * d[1] + 1]


def _nhwc(x, fmt):
    return x if fmt == "NHWC" else tf.transpose(x, [0, 2, 3, 1])


def _from_nhwc(x, fmt):
    return x if fmt == "NHWC" else tf.transpose(x, [0, 3, 1, 2])


def _close(got, want, dtype):
    got = tf.cast(got, tf.float64).numpy()
    want = tf.cast(want, tf.float64).numpy()
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got - want).max()) if got.size else 0.0
    assert err <= TOLERANCE[dtype] * scale, "max error %g" % err


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_match_raw_ops(depthwise, fmt, dtype):
    rng = random.Random(zlib.crc32(("%s-%s-%s" % (depthwise, fmt, dtype)).encode()))
    np_rng = np.random.default_rng(rng.randint(0, 1000))
    for _ in range(3):
        (n, h, w, c), fshape, s, d, pad, p = _case(rng, depthwise)
        attrs = _attrs(fmt, s, d, pad, p)
        # TensorFlow's CPU kernels compute NHWC only, and take the dilation as _dilate does.
        ref_attrs = _attrs("NHWC", s, (1, 1), pad, p)
        x64 = tf.constant(np_rng.standard_normal((n, h, w, c)))
        w64 = tf.constant(np_rng.standard_normal(fshape))
        x64, w64 = tf.cast(tf.cast(x64, dtype), tf.float64), tf.cast(tf.cast(w64, dtype), tf.float64)
        ref_forward = tf.raw_ops.DepthwiseConv2dNative if depthwise else tf.raw_ops.Conv2D
        with tf.GradientTape() as tape:
            tape.watch([x64, w64])
            want = ref_forward(input=x64, filter=_dilate(w64, d), **ref_attrs)
        dy64 = tf.cast(tf.cast(tf.constant(np_rng.standard_normal(want.shape)), dtype), tf.float64)
        want_dx, want_dw = tape.gradient(want, [x64, w64], output_gradients=dy64)

        x = _from_nhwc(tf.cast(x64, dtype), fmt)
        filter = tf.cast(w64, dtype)
        dy = _from_nhwc(tf.cast(dy64, dtype), fmt)
        forward = ctf.depthwise_conv2d_native if depthwise else ctf.conv2d
        y = forward(x, filter, **attrs)
        assert y.dtype == tf.as_dtype(dtype)
        _close(_nhwc(y, fmt), want, dtype)
        if depthwise:
            dx = ctf.depthwise_conv2d_native_backprop_input(tf.shape(x), filter, dy, **attrs)
            dw = ctf.depthwise_conv2d_native_backprop_filter(x, tf.shape(filter), dy, **attrs)
        else:
            dx = ctf.conv2d_backprop_input(tf.shape(x), filter, dy, **attrs)
            dw = ctf.conv2d_backprop_filter(x, tf.shape(filter), dy, **attrs)
        _close(_nhwc(dx, fmt), want_dx, dtype)
        _close(dw, want_dw, dtype)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_gradients_through_tape_and_compute_gradient(depthwise):
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal((2, 6, 5, 3)))
    filter = tf.constant(rng.standard_normal((3, 2, 3, 2)))
    attrs = dict(strides=[1, 2, 2, 1], padding="EXPLICIT",
                 explicit_paddings=[0, 0, 1, 1, 0, 0, 0, 0])
    forward = ctf.depthwise_conv2d_native if depthwise else ctf.conv2d
    ref = tf.raw_ops.DepthwiseConv2dNative if depthwise else tf.raw_ops.Conv2D

    @tf.function
    def grads(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            loss = tf.reduce_sum(tf.sin(forward(a, b, **attrs)))
        return tape.gradient(loss, [a, b])

    with tf.GradientTape() as tape:
        tape.watch([x, filter])
        loss = tf.reduce_sum(tf.sin(ref(input=x, filter=filter, **attrs)))
    want = tape.gradient(loss, [x, filter])
    got = grads(x, filter)
    graph = grads.get_concrete_function(x, filter).graph
    types = {op.type for op in graph.get_operations()}
    prefix = "ConvjitDepthwiseConv2dNative" if depthwise else "ConvjitConv2D"
    assert {prefix, prefix + "BackpropInput", prefix + "BackpropFilter"} <= types, types
    _close(got[0], want[0], "float64")
    _close(got[1], want[1], "float64")
    theoretical, numerical = tf.test.compute_gradient(lambda a, b: forward(a, b, **attrs),
                                                      [x, filter])
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, atol=1e-6)


def test_shape_functions_and_errors():
    @tf.function(input_signature=[tf.TensorSpec([None, 9, 7, 4], tf.float32)])
    def f(x):
        y = ctf.conv2d(x, tf.zeros([3, 2, 4, 6]), strides=[1, 2, 3, 1], padding="VALID")
        assert y.shape.as_list() == [None, 4, 2, 6], y.shape
        return y

    assert f(tf.zeros([2, 9, 7, 4])).shape == (2, 4, 2, 6)
    x = tf.zeros([1, 5, 5, 2])
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.UnimplementedError),
                       match="strides in the batch and depth dimensions"):
        ctf.conv2d(x, tf.zeros([3, 3, 2, 4]), [2, 1, 1, 1], "SAME")
    with pytest.raises(tf.errors.InvalidArgumentError, match="depth"):
        ctf.conv2d(x, tf.zeros([3, 3, 3, 4]), [1, 1, 1, 1], "SAME")
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError)):
        ctf.conv2d(tf.zeros([1, 5, 5, 2], tf.int32), tf.zeros([3, 3, 2, 4], tf.int32),
                   [1, 1, 1, 1], "SAME")
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_sizes"):
        ctf.conv2d_backprop_input(tf.zeros([2, 2], tf.int32), tf.zeros([3, 3, 2, 4]),
                                  tf.zeros([1, 5, 5, 4]), [1, 1, 1, 1], "SAME")


def _model(layers_module, keras, fmt):
    shape = (8, 8, 3) if fmt == "channels_last" else (3, 8, 8)
    return keras.Sequential([
        keras.Input(shape),
        layers_module.Conv2D(6, 3, padding="same", activation="relu", data_format=fmt),
        layers_module.DepthwiseConv2D(3, strides=2, depth_multiplier=2, padding="valid",
                                      data_format=fmt),
        layers_module.Conv2D(4, (1, 2), dilation_rate=1, groups=2, use_bias=False,
                             data_format=fmt),
        # Flattened in channels_last order either way, so the Dense weights mean the same.
        keras.layers.Flatten(data_format=fmt),
        keras.layers.Dense(2),
    ])


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_keras_fit_matches_keras_layers(fmt):
    import keras
    import convjit.keras as ck

    keras.utils.set_random_seed(0)
    ours = _model(ck, keras, fmt)
    # The reference is Keras' layers in channels_last on the same data: TensorFlow's CPU kernels
    # cannot train NCHW convolutions (Conv2DBackpropFilter "only supports NHWC"; Keras 3.15 no
    # longer routes them through XLA), and the weights (HWIO filters) are the same in both.
    theirs = _model(keras.layers, keras, "channels_last")
    theirs.set_weights(ours.get_weights())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8, 8, 3)).astype(np.float32)
    y = rng.standard_normal((16, 2)).astype(np.float32)
    x_ours = x if fmt == "channels_last" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    losses = []
    for model, data in ((ours, x_ours), (theirs, x)):
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        history = model.fit(data, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
        losses.append(history.history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    assert isinstance(ours.layers[0], ck.Conv2D)
    assert ck.Conv2D.from_config(ours.layers[0].get_config()).filters == 6
