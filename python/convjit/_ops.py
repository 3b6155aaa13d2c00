"""The six TensorFlow ops and ``compile``: TensorFlow's signatures over the compiled core."""

from . import _convjit

_call = _convjit.call_op

_ARRAYS = """
    Arrays are anything with ``__dlpack__`` or the buffer protocol (NumPy, PyTorch, JAX,
    TensorFlow, CuPy), 4-D, C-contiguous, of one dtype: float16, bfloat16
    (``ml_dtypes.bfloat16`` or a framework's bfloat16), float32 or float64. Activations are
    in ``data_format`` order, filters HWIO (depthwise: ``[h, w, in_channels, multiplier]``).
    The result is a new array of the first array's kind (NumPy in, NumPy out; PyTorch in,
    PyTorch out; ...), sharing memory with nothing, or ``out`` written in place (a writable
    array of the result's shape and dtype that overlaps no input).

    The kernel is compiled on the first call with these shapes and attributes and reused
    after that (memory and disk caches). Arrays on a CUDA device compile for device
    ``cuda:N`` and run on the framework's current stream.

    Raises:
      convjit.Error: (a ValueError) a bad array or attribute, with TensorFlow's message.
"""


def _doc(summary, args):
    return summary + "\n\n    Args:\n" + args + _ARRAYS


_ATTRS = """      strides: 4 integers, the stride of the sliding window in each dimension of the
        input, in ``data_format`` order (batch and depth strides must be 1).
      padding: "SAME", "VALID" or "EXPLICIT".
      explicit_paddings: with padding="EXPLICIT", 8 integers: (before, after) for each of the
        4 dimensions in ``data_format`` order (batch and depth pads 0).
      data_format: "NHWC" (default) or "NCHW".
      dilations: 4 integers, the dilation in each dimension (batch and depth 1).
      out: optional array that receives the result in place.
      name: accepted for TensorFlow compatibility; unused.
"""


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding, explicit_paddings=(),
                          data_format="NHWC", dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("Conv2DBackpropInput", input_sizes, filter, out_backprop, strides, padding,
                 explicit_paddings, data_format, dilations, out)


conv2d_backprop_input.__doc__ = _doc(
    """The gradient of conv2d with respect to its input: tf.raw_ops.Conv2DBackpropInput.

    Returns an array of shape ``input_sizes``.""",
    """      input_sizes: 4 integers (list, tuple or 1-D integer array), the shape of the input.
      filter: [filter_height, filter_width, in_channels, out_channels].
      out_backprop: the gradient with respect to the conv2d output.
""" + _ATTRS)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding, explicit_paddings=(),
                           data_format="NHWC", dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("Conv2DBackpropFilter", filter_sizes, input, out_backprop, strides, padding,
                 explicit_paddings, data_format, dilations, out)


conv2d_backprop_filter.__doc__ = _doc(
    """The gradient of conv2d with respect to its filter: tf.raw_ops.Conv2DBackpropFilter.

    Returns an array of shape ``filter_sizes`` (HWIO).""",
    """      input: the conv2d input, [batch, height, width, in_channels] (NHWC).
      filter_sizes: 4 integers, the filter's shape [h, w, in_channels, out_channels].
      out_backprop: the gradient with respect to the conv2d output.
""" + _ATTRS)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           explicit_paddings=(), data_format="NHWC",
                                           dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("DepthwiseConv2dNativeBackpropInput", input_sizes, filter, out_backprop, strides,
                 padding, explicit_paddings, data_format, dilations, out)


depthwise_conv2d_native_backprop_input.__doc__ = _doc(
    """The gradient of depthwise_conv2d_native with respect to its input:
    tf.raw_ops.DepthwiseConv2dNativeBackpropInput.

    Returns an array of shape ``input_sizes``.""",
    """      input_sizes: 4 integers, the shape of the input.
      filter: [filter_height, filter_width, in_channels, channel_multiplier].
      out_backprop: the gradient with respect to the output (in_channels * multiplier deep).
""" + _ATTRS)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            explicit_paddings=(), data_format="NHWC",
                                            dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("DepthwiseConv2dNativeBackpropFilter", filter_sizes, input, out_backprop, strides,
                 padding, explicit_paddings, data_format, dilations, out)


depthwise_conv2d_native_backprop_filter.__doc__ = _doc(
    """The gradient of depthwise_conv2d_native with respect to its filter:
    tf.raw_ops.DepthwiseConv2dNativeBackpropFilter.

    Returns an array of shape ``filter_sizes``.""",
    """      input: the forward input.
      filter_sizes: 4 integers, [h, w, in_channels, channel_multiplier].
      out_backprop: the gradient with respect to the output.
""" + _ATTRS)


def conv2d(input, filter, strides, padding, explicit_paddings=(), data_format="NHWC",
           dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("Conv2D", None, input, filter, strides, padding, explicit_paddings, data_format,
                 dilations, out)


conv2d.__doc__ = _doc(
    """A 2-D convolution (cross-correlation, as TensorFlow computes it): tf.raw_ops.Conv2D.""",
    """      input: [batch, height, width, in_channels] (NHWC) or NCHW.
      filter: [filter_height, filter_width, in_channels, out_channels].
""" + _ATTRS)


def depthwise_conv2d_native(input, filter, strides, padding, explicit_paddings=(), data_format="NHWC",
                            dilations=(1, 1, 1, 1), *, out=None, name=None):
    return _call("DepthwiseConv2dNative", None, input, filter, strides, padding, explicit_paddings,
                 data_format, dilations, out)


depthwise_conv2d_native.__doc__ = _doc(
    """A depthwise 2-D convolution: tf.raw_ops.DepthwiseConv2dNative.""",
    """      input: [batch, height, width, in_channels] (NHWC) or NCHW.
      filter: [filter_height, filter_width, in_channels, channel_multiplier].
""" + _ATTRS)


# ---- compile

_SIZES_OPS = {"input_sizes": ("Conv2DBackpropInput", "Conv2DBackpropInputV2",
                              "DepthwiseConv2dNativeBackpropInput"),
              "filter_sizes": ("Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter")}
_PY_NAMES = {
    "conv2d": "Conv2D",
    "conv2d_backprop_input": "Conv2DBackpropInput",
    "conv2d_backprop_input_v2": "Conv2DBackpropInputV2",
    "conv2d_backprop_filter": "Conv2DBackpropFilter",
    "depthwise_conv2d_native": "DepthwiseConv2dNative",
    "depthwise_conv2d_native_backprop_input": "DepthwiseConv2dNativeBackpropInput",
    "depthwise_conv2d_native_backprop_filter": "DepthwiseConv2dNativeBackpropFilter",
}
_ATTR_NAMES = ("input_sizes", "filter_sizes", "input", "filter", "out_backprop", "strides", "padding",
               "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu")


def _ints(values, name):
    try:
        return tuple(int(v) for v in values)
    except TypeError:
        raise _convjit.Error("%s must be a list of integers, but got %r" % (name, values)) from None


def _output_shape(op, input_shape, filter_shape, strides, padding, explicit_paddings, data_format,
                  dilations):
    """TensorFlow's output-size rule: out_backprop's shape when compile() is not given it.
    Malformed attributes give a placeholder and validation reports TensorFlow's error."""
    try:
        n, h, w, c = (0, 1, 2, 3) if data_format in ("NHWC", b"NHWC") else (0, 2, 3, 1)
        channels = filter_shape[3] * (filter_shape[2] if op.startswith("Depthwise") else 1)
        spatial = []
        for i, dim in enumerate((h, w)):
            k = (filter_shape[i] - 1) * dilations[dim] + 1
            size, s = input_shape[dim], strides[dim]
            if padding in ("VALID", b"VALID"):
                spatial.append(max((size - k + s) // s, 0))
            elif padding in ("SAME", b"SAME"):
                spatial.append((size + s - 1) // s)
            else:
                pads = explicit_paddings[2 * dim] + explicit_paddings[2 * dim + 1]
                spatial.append(max((size + pads - k) // s + 1, 0))
        shape = [0] * 4
        shape[n], shape[h], shape[w], shape[c] = input_shape[n], spatial[0], spatial[1], channels
        return tuple(shape)
    except (IndexError, TypeError, ZeroDivisionError):
        return (1, 1, 1, 1)


def compile(op, *, dtype="float32", device="cpu", backend=None, num_threads=0, **attrs):
    """Compiles one op instance and returns a ``convjit.Kernel``.

    ``op`` is TensorFlow's op name or its Python name ("Conv2DBackpropInput" or
    "conv2d_backprop_input", ...). The attributes are TensorFlow's, by name, with the shapes
    of the tensor arguments in place of the tensors::

        k = convjit.compile("conv2d_backprop_input", input_sizes=(8, 28, 28, 128),
                            filter=(3, 3, 128, 128), out_backprop=(8, 28, 28, 128),
                            strides=(1, 1, 1, 1), padding="SAME", dtype="float32")
        dx = k.run(w, dy)          # or k.run(w, dy, out=dx)

    Args:
      op: the op's TensorFlow or Python name.
      dtype: "float16", "bfloat16", "float32" or "float64" (or a NumPy, ml_dtypes,
        PyTorch, JAX or TensorFlow dtype).
      device: "cpu", "cuda" or "cuda:N" (the CUDA backend), "cuda-interpret".
      backend: None for the device's best, or "x86", "interpreter", ...
      num_threads: CPU threads a run may use; 0 for $CONVJIT_NUM_THREADS, else all cores.
      input_sizes / filter_sizes: the ``*_sizes`` values of the backprop ops.
      input, filter, out_backprop: the shapes of those tensors. ``out_backprop`` may be left
        out: TensorFlow's output-size rule gives it.
      strides, padding, explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1):
        as in TensorFlow.

    ``Kernel.run(a, b, out=None)`` takes the two array operands in TensorFlow's argument
    order (``Kernel.operand_shapes`` gives their shapes); ``Kernel.name``, ``backend``,
    ``descriptor`` and ``workspace_bytes`` describe it.

    Raises:
      convjit.Error: an unknown op or attribute, or a descriptor TensorFlow would refuse.
    """
    if not isinstance(op, str):
        raise _convjit.Error("op must be a string, but got %r" % (op,))
    tf_op = _PY_NAMES.get(op, op)
    if tf_op not in _PY_NAMES.values():
        raise _convjit.Error("unknown op '%s'; convjit compiles %s (or their TensorFlow names, e.g. "
                             "Conv2DBackpropInput)" % (op, ", ".join(_PY_NAMES)))
    unknown = sorted(set(attrs) - set(_ATTR_NAMES))
    if unknown:
        raise _convjit.Error("compile(%s) got unknown attribute(s) %s; it takes %s" % (
            op, ", ".join(unknown), ", ".join(_ATTR_NAMES)))
    for sizes, ops in _SIZES_OPS.items():
        if sizes in attrs and tf_op not in ops:
            raise _convjit.Error("%s takes no %s" % (tf_op, sizes))
    if "strides" not in attrs or "padding" not in attrs:
        raise _convjit.Error("compile(%s) needs strides and padding" % op)
    data_format = attrs.get("data_format", "NHWC")
    dilations = _ints(attrs.get("dilations", (1, 1, 1, 1)), "dilations")
    explicit = _ints(attrs.get("explicit_paddings", ()), "explicit_paddings")
    strides = _ints(attrs["strides"], "strides")
    if tf_op in _SIZES_OPS["input_sizes"]:
        input_shape = _ints(attrs.get("input_sizes", ()), "input_sizes")
        filter_shape = _ints(attrs.get("filter", ()), "filter")
    elif tf_op in _SIZES_OPS["filter_sizes"]:
        input_shape = _ints(attrs.get("input", ()), "input")
        filter_shape = _ints(attrs.get("filter_sizes", ()), "filter_sizes")
    else:
        input_shape = _ints(attrs.get("input", ()), "input")
        filter_shape = _ints(attrs.get("filter", ()), "filter")
    forward = tf_op in ("Conv2D", "DepthwiseConv2dNative")
    if forward:
        if "out_backprop" in attrs:
            raise _convjit.Error("%s takes no out_backprop" % tf_op)
        out_backprop = ()
    elif "out_backprop" in attrs:
        out_backprop = _ints(attrs["out_backprop"], "out_backprop")
    else:
        out_backprop = _output_shape(tf_op, input_shape, filter_shape, strides, attrs["padding"],
                                     explicit, data_format, dilations)
    return _convjit.compile_kernel(tf_op, dtype, device, backend or "", int(num_threads), input_shape,
                                   filter_shape, out_backprop, strides, attrs["padding"], explicit,
                                   data_format, dilations)
