"""convjit in JAX: the six ops as XLA FFI custom calls, with TensorFlow's names and arguments.

::

    import convjit.jax as cj
    y = cj.conv2d(x, w, strides=(1, 1, 1, 1), padding="SAME")          # NHWC, HWIO
    dx = cj.conv2d_backprop_input(x.shape, w, dy, (1, 1, 1, 1), "SAME")

``conv2d`` and ``depthwise_conv2d_native`` are differentiable (``jax.custom_vjp``; the
backward pass runs convjit's gradient ops). All six work under ``jax.jit``, ``jax.grad`` and
``jax.vmap``: a vmapped activation (input, out_backprop) of the forward and input-gradient
ops is folded into the batch dimension, one kernel call; a vmapped filter, and the filter
gradients (which sum over the batch, so per-slice results cannot come from one folded call),
run one kernel per slice (``jax.lax.map``). ``input_sizes`` / ``filter_sizes`` are static (Python integers), as TensorFlow needs them
on the host.

The custom call is a small library compiled on first use against the installed jaxlib's FFI
headers (``jax.ffi.include_dir()``) and convjit's C ABI, cached in convjit's adapter cache
(see ``convjit._adapters.native``). Kernels are compiled once per op instance and kept.

Threads: the kernel's parallel loops run on XLA's CPU intra-op thread pool (the FFI
ThreadPool context), the calling thread taking chunks too. Errors in an op instance (bad
strides, shapes, padding) are raised while tracing, as ``convjit.Error`` (a ``ValueError``)
with TensorFlow's message; failures while running come back as XLA runtime errors with
convjit's message.

GPU: on JAX's CUDA platform the same custom call compiles the kernel for the call's device and
queues it on XLA's stream (the workspace from XLA's allocator); that needs a libconvjit built
with the CUDA backend.
"""

import ctypes
import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._convjit import Error
from ._adapters import native as _native

__all__ = [
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
]

_TARGET = "convjit_op"
_DTYPES = {np.dtype(jnp.float16): 0, np.dtype(jnp.bfloat16): 1, np.dtype(jnp.float32): 2,
           np.dtype(jnp.float64): 3}


@functools.lru_cache(maxsize=None)
def _library():
    import jaxlib

    path = _native.build_library("convjit_jax", ["jax_ffi.cc"], ["-I", jax.ffi.include_dir()], [],
                                "jaxlib " + jaxlib.__version__)
    lib = ctypes.CDLL(path)
    jax.ffi.register_ffi_target(_TARGET, jax.ffi.pycapsule(lib.ConvjitOp), platform="cpu")
    # XLA keeps a platform's targets until that platform's backend compiles a call to one, so
    # registering the CUDA handler costs nothing where jaxlib has no CUDA plugin.
    jax.ffi.register_ffi_target(_TARGET, jax.ffi.pycapsule(lib.ConvjitOpCuda), platform="CUDA")
    i64p = ctypes.POINTER(ctypes.c_int64)
    lib.convjit_jax_infer.restype = ctypes.c_int
    lib.convjit_jax_infer.argtypes = [
        ctypes.c_char_p, ctypes.c_int, i64p, ctypes.c_int, i64p, i64p, i64p, ctypes.c_int,
        ctypes.c_char_p, i64p, ctypes.c_int, ctypes.c_char_p, i64p, ctypes.c_int, i64p,
        ctypes.c_char_p, ctypes.c_int]
    return lib


def _int64s(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def _infer(op, dtype, sizes, a_shape, b_shape, attrs):
    """The result's shape, or convjit.Error with TensorFlow's message (while tracing)."""
    strides, padding, explicit, data_format, dilations = attrs
    names = {"Conv2DBackpropInput": ("filter", "out_backprop"),
             "DepthwiseConv2dNativeBackpropInput": ("filter", "out_backprop"),
             "Conv2DBackpropFilter": ("input", "out_backprop"),
             "DepthwiseConv2dNativeBackpropFilter": ("input", "out_backprop")}.get(
                 op, ("input", "filter"))
    for name, shape in zip(names, (a_shape, b_shape)):
        if len(shape) != 4:
            raise Error("%s: %s must be 4-dimensional, but got shape %s" % (op, name, list(shape)))
    if np.dtype(dtype) not in _DTYPES:
        raise Error("%s: convjit computes float16, bfloat16, float32 and float64, but got %s" %
                    (op, np.dtype(dtype).name))
    out = (ctypes.c_int64 * 4)()
    message = ctypes.create_string_buffer(2048)
    status = _library().convjit_jax_infer(
        op.encode(), _DTYPES[np.dtype(dtype)], _int64s(sizes), len(sizes), _int64s(a_shape),
        _int64s(b_shape), _int64s(strides), len(strides), padding.encode(), _int64s(explicit),
        len(explicit), data_format.encode(), _int64s(dilations), len(dilations), out, message,
        len(message))
    if status != 0:
        raise Error(message.value.decode(errors="replace"))
    return tuple(int(v) for v in out)


def _ffi(op, sizes, attrs, a, b):
    if a.dtype != b.dtype:
        raise Error("%s: the operands have dtypes %s and %s; they must match" % (op, a.dtype,
                                                                                b.dtype))
    shape = _infer(op, a.dtype, sizes, a.shape, b.shape, attrs)
    strides, padding, explicit, data_format, dilations = attrs
    call = jax.ffi.ffi_call(_TARGET, jax.ShapeDtypeStruct(shape, a.dtype))
    return call(a, b, op=op, sizes=np.array(sizes, np.int64), strides=np.array(strides, np.int64),
                padding=padding, explicit_paddings=np.array(explicit, np.int64),
                data_format=data_format, dilations=np.array(dilations, np.int64))


# Which operand carries the batch, for folding a vmapped axis into it: the forward ops' input
# (first) and the input gradients' out_backprop (second). The filter gradients sum over the
# batch, so a vmapped axis cannot be folded into it.
_BATCH_OPERAND = {"Conv2D": 0, "DepthwiseConv2dNative": 0, "Conv2DBackpropInput": 1,
                  "DepthwiseConv2dNativeBackpropInput": 1}


@functools.lru_cache(maxsize=4096)
def _raw(op, sizes, attrs):
    """The op instance as a function of its two operands, with a vmap rule."""

    @jax.custom_batching.custom_vmap
    def call(a, b):
        return _ffi(op, sizes, attrs, a, b)

    @call.def_vmap
    def _(axis_size, in_batched, a, b):
        batch = _BATCH_OPERAND.get(op)
        if batch is not None and not in_batched[1 - batch]:
            # Only the activations are vmapped: fold the vmapped axis into the batch.
            operands = [a, b]
            x = operands[batch]
            operands[batch] = x.reshape((axis_size * x.shape[1],) + x.shape[2:])
            new_sizes = sizes
            if op.endswith("BackpropInput"):
                new_sizes = (sizes[0] * axis_size,) + tuple(sizes[1:])
            out = _raw(op, new_sizes, attrs)(*operands)
            return out.reshape((axis_size, out.shape[0] // axis_size) + out.shape[1:]), True
        # A vmapped filter, or a filter gradient (which sums over the batch) of vmapped
        # operands: one op per slice.
        a_batched, b_batched = in_batched

        def one(slices):
            a_i = slices[0] if a_batched else a
            b_i = slices[1] if b_batched else b
            return _raw(op, sizes, attrs)(a_i, b_i)

        return jax.lax.map(one, (a if a_batched else None, b if b_batched else None)), True

    return call


def _attrs(strides, padding, explicit_paddings, data_format, dilations):
    if isinstance(padding, bytes):
        padding = padding.decode()
    if isinstance(data_format, bytes):
        data_format = data_format.decode()
    if not isinstance(padding, str) or not isinstance(data_format, str):
        raise Error("padding and data_format must be strings, but got %r and %r" %
                    (padding, data_format))
    try:
        return (tuple(int(s) for s in strides), padding,
                tuple(int(p) for p in explicit_paddings), data_format,
                tuple(int(d) for d in dilations))
    except TypeError:
        raise Error("strides, explicit_paddings and dilations must be lists of integers") from None


def _sizes(values, name):
    try:
        return tuple(int(v) for v in values)
    except (TypeError, jax.errors.ConcretizationTypeError):
        raise Error("%s must be static integers (a tuple or a concrete array), but got %r" %
                    (name, values)) from None


# ---- the differentiable forward ops

def _make_forward(op, input_op, filter_op):
    @functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
    def forward(input, filter, attrs):
        return _raw(op, (), attrs)(input, filter)

    def fwd(input, filter, attrs):
        return forward(input, filter, attrs), (input, filter)

    def bwd(attrs, residuals, grad):
        input, filter = residuals
        d_input = _raw(input_op, tuple(input.shape), attrs)(filter, grad)
        d_filter = _raw(filter_op, tuple(filter.shape), attrs)(input, grad)
        return d_input, d_filter

    forward.defvjp(fwd, bwd)
    return forward


_conv2d = _make_forward("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
_depthwise = _make_forward("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                           "DepthwiseConv2dNativeBackpropFilter")


def conv2d(input, filter, strides, padding, explicit_paddings=(), data_format="NHWC",
           dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.Conv2D (filter HWIO); differentiable in input and filter."""
    return _conv2d(input, filter, _attrs(strides, padding, explicit_paddings, data_format,
                                         dilations))


def depthwise_conv2d_native(input, filter, strides, padding, explicit_paddings=(),
                            data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNative (filter [h, w, in, multiplier]); differentiable."""
    return _depthwise(input, filter, _attrs(strides, padding, explicit_paddings, data_format,
                                            dilations))


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1),
                          name=None):
    """tf.raw_ops.Conv2DBackpropInput; ``input_sizes`` static."""
    return _raw("Conv2DBackpropInput", _sizes(input_sizes, "input_sizes"),
                _attrs(strides, padding, explicit_paddings, data_format, dilations))(
                    filter, out_backprop)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1),
                           name=None):
    """tf.raw_ops.Conv2DBackpropFilter; ``filter_sizes`` static."""
    return _raw("Conv2DBackpropFilter", _sizes(filter_sizes, "filter_sizes"),
                _attrs(strides, padding, explicit_paddings, data_format, dilations))(
                    input, out_backprop)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           explicit_paddings=(), data_format="NHWC",
                                           dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropInput; ``input_sizes`` static."""
    return _raw("DepthwiseConv2dNativeBackpropInput", _sizes(input_sizes, "input_sizes"),
                _attrs(strides, padding, explicit_paddings, data_format, dilations))(
                    filter, out_backprop)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            explicit_paddings=(), data_format="NHWC",
                                            dilations=(1, 1, 1, 1), name=None):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropFilter; ``filter_sizes`` static."""
    return _raw("DepthwiseConv2dNativeBackpropFilter", _sizes(filter_sizes, "filter_sizes"),
                _attrs(strides, padding, explicit_paddings, data_format, dilations))(
                    input, out_backprop)
