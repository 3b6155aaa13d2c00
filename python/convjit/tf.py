"""convjit in TensorFlow: an op library with TensorFlow's six convolution ops, prefixed.

``import convjit.tf`` loads (and on first use builds) the op library and registers
``ConvjitConv2D``, ``ConvjitConv2DBackpropInput``, ``ConvjitConv2DBackpropFilter``,
``ConvjitDepthwiseConv2dNative``, ``ConvjitDepthwiseConv2dNativeBackpropInput`` and
``ConvjitDepthwiseConv2dNativeBackpropFilter`` with TensorFlow's inputs, attributes and shape
functions. The functions here take TensorFlow's argument names::

    import convjit.tf as ctf
    y = ctf.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
    dx = ctf.conv2d_backprop_input(tf.shape(x), w, dy, [1, 1, 1, 1], "SAME")

Gradients are registered for ``ConvjitConv2D`` and ``ConvjitDepthwiseConv2dNative``: a
``tf.GradientTape`` (or ``tf.function``) through them runs convjit's backprop ops. ``ops`` is
the loaded module (``ops.convjit_conv2d(...)``, ...).

Each op instance (graph node, or eager attribute set) compiles its kernel on its first run for
its operand shapes and keeps it. CPU kernels run their parallel loops on the TensorFlow
device's intra-op thread pool. Errors are TensorFlow's: ``InvalidArgumentError`` (or
``UnimplementedError`` where TensorFlow says "Current implementation does not yet support")
with convjit's message.

The library is built against the installed TensorFlow with ``tf.sysconfig``'s compile and
link flags on first use (a message says so; a minute on a busy machine) into convjit's adapter
cache (``$CONVJIT_ADAPTER_DIR``, see ``convjit._adapters.native``), once per TensorFlow and
convjit version.
"""

import tensorflow as tf

from ._adapters import native as _native

__all__ = [
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "ops",
]


def _load():
    flags = tf.sysconfig.get_compile_flags()
    cflags = [f for f in flags if not f.startswith("--std") and not f.startswith("-std")]
    path = _native.build_library("convjit_tf", ["tf_ops.cc"], cflags + ["-Wno-deprecated-declarations"],
                                tf.sysconfig.get_link_flags(), "tensorflow " + tf.__version__)
    return tf.load_op_library(path)


ops = _load()


def _attrs(op):
    return dict(strides=op.get_attr("strides"), padding=op.get_attr("padding"),
                explicit_paddings=op.get_attr("explicit_paddings"),
                data_format=op.get_attr("data_format"), dilations=op.get_attr("dilations"))


@tf.RegisterGradient("ConvjitConv2D")
def _conv2d_grad(op, grad):
    input, filter = op.inputs
    attrs = _attrs(op)
    return [ops.convjit_conv2d_backprop_input(tf.shape(input), filter, grad, **attrs),
            ops.convjit_conv2d_backprop_filter(input, tf.shape(filter), grad, **attrs)]


@tf.RegisterGradient("ConvjitDepthwiseConv2dNative")
def _depthwise_grad(op, grad):
    input, filter = op.inputs
    attrs = _attrs(op)
    return [ops.convjit_depthwise_conv2d_native_backprop_input(tf.shape(input), filter, grad,
                                                               **attrs),
            ops.convjit_depthwise_conv2d_native_backprop_filter(input, tf.shape(filter), grad,
                                                                **attrs)]


def _common(strides, padding, explicit_paddings, data_format, dilations, name):
    return dict(strides=list(strides), padding=padding, explicit_paddings=list(explicit_paddings),
                data_format=data_format, dilations=list(dilations), name=name)


def conv2d(input, filter, strides, padding, explicit_paddings=(), data_format="NHWC",
           dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.Conv2D through convjit; differentiable."""
    return ops.convjit_conv2d(input, filter, **_common(strides, padding, explicit_paddings,
                                                       data_format, dilations, name))


def depthwise_conv2d_native(input, filter, strides, padding, explicit_paddings=(),
                            data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNative through convjit; differentiable."""
    return ops.convjit_depthwise_conv2d_native(
        input, filter, **_common(strides, padding, explicit_paddings, data_format, dilations,
                                 name))


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1),
                          name=None):
    """tf.raw_ops.Conv2DBackpropInput through convjit."""
    return ops.convjit_conv2d_backprop_input(
        tf.cast(input_sizes, tf.int32), filter, out_backprop,
        **_common(strides, padding, explicit_paddings, data_format, dilations, name))


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1),
                           name=None):
    """tf.raw_ops.Conv2DBackpropFilter through convjit."""
    return ops.convjit_conv2d_backprop_filter(
        input, tf.cast(filter_sizes, tf.int32), out_backprop,
        **_common(strides, padding, explicit_paddings, data_format, dilations, name))


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           explicit_paddings=(), data_format="NHWC",
                                           dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropInput through convjit."""
    return ops.convjit_depthwise_conv2d_native_backprop_input(
        tf.cast(input_sizes, tf.int32), filter, out_backprop,
        **_common(strides, padding, explicit_paddings, data_format, dilations, name))


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            explicit_paddings=(), data_format="NHWC",
                                            dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropFilter through convjit."""
    return ops.convjit_depthwise_conv2d_native_backprop_filter(
        input, tf.cast(filter_sizes, tf.int32), out_backprop,
        **_common(strides, padding, explicit_paddings, data_format, dilations, name))
