"""convjit in PyTorch: the six ops as ``torch.library`` custom ops, autograd, and ``Conv2d``.

``import convjit.torch`` registers the ops under the ``convjit`` namespace::

    torch.ops.convjit.conv2d(input, filter, strides, padding, explicit_paddings, data_format,
                             dilations)
    torch.ops.convjit.conv2d_backprop_input(input_sizes, filter, out_backprop, ...)
    torch.ops.convjit.conv2d_backprop_filter(input, filter_sizes, out_backprop, ...)
    torch.ops.convjit.depthwise_conv2d_native(...), ..._backprop_input(...), ..._backprop_filter(...)

with TensorFlow's semantics (filters HWIO, ``data_format`` "NHWC" or "NCHW"). The functions of
this module (``convjit.torch.conv2d`` ...) call them with TensorFlow's argument names and
defaults. Each op has a fake (meta) kernel, so ``torch.compile`` traces it without running it,
and ``conv2d`` / ``depthwise_conv2d_native`` are differentiable: their backward runs convjit's
gradient ops. ``Conv2d`` is a drop-in for ``torch.nn.Conv2d`` (NCHW, OIHW weights, the same
constructor arguments and state_dict).

Threads: a CPU kernel is compiled for ``torch.get_num_threads()`` threads and its parallel
loops run on PyTorch's own intra-op pool (``at::parallel_for``), through a small native library
built against the installed torch on first use (``_adapters/torch_pool.cc``, cached like the
TensorFlow adapter; it needs a C++ compiler). So convjit's kernels and PyTorch's operators share
one set of threads and ``torch.set_num_threads`` governs both. Where that library cannot be
built, a warning says why and the kernels run on convjit's own pool of the same size. CUDA
tensors compile for ``cuda:N`` and run on PyTorch's current stream when convjit's CUDA backend
is built.

Errors are ``RuntimeError`` with convjit's (TensorFlow's) message.
"""

import atexit
import ctypes
import os
import threading
import warnings

import torch

from . import _convjit
from . import _ops
from ._adapters import native as _native

__all__ = [
    "Conv2d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
]

_TF_NAMES = {
    "conv2d": "Conv2D",
    "conv2d_backprop_input": "Conv2DBackpropInput",
    "conv2d_backprop_filter": "Conv2DBackpropFilter",
    "depthwise_conv2d_native": "DepthwiseConv2dNative",
    "depthwise_conv2d_native_backprop_input": "DepthwiseConv2dNativeBackpropInput",
    "depthwise_conv2d_native_backprop_filter": "DepthwiseConv2dNativeBackpropFilter",
}

# ---- running one op: a compiled kernel per op instance, written into a tensor torch allocates

_kernels = {}
_kernels_lock = threading.Lock()
_KERNELS_CAPACITY = 1024  # convjit's own memory and disk caches keep the code past this
# The ops live as long as torch's registry, past the module's teardown: the kernels go first.
atexit.register(_kernels.clear)


def _kernel(op, dtype, device, sizes, a_shape, b_shape, attrs):
    threads = torch.get_num_threads() if device == "cpu" else 0
    key = (op, dtype, device, threads, sizes, a_shape, b_shape, attrs)
    kernel = _kernels.get(key)
    if kernel is not None:
        return kernel
    strides, padding, explicit_paddings, data_format, dilations = attrs
    shapes = {}
    if "backprop_input" in op:
        shapes = dict(input_sizes=sizes, filter=a_shape, out_backprop=b_shape)
    elif "backprop_filter" in op:
        shapes = dict(input=a_shape, filter_sizes=sizes, out_backprop=b_shape)
    else:
        shapes = dict(input=a_shape, filter=b_shape)
    kernel = _ops.compile(op, dtype=dtype, device=device, num_threads=threads, strides=strides,
                          padding=padding, explicit_paddings=explicit_paddings,
                          data_format=data_format, dilations=dilations, **shapes)
    kernel = (kernel, kernel.operand_shapes[2])
    with _kernels_lock:
        if len(_kernels) >= _KERNELS_CAPACITY:
            _kernels.clear()
        _kernels[key] = kernel
    return kernel


# ---- PyTorch's intra-op pool: the address of convjit_torch_parallel_for (0: convjit's pool)

_pool_address = None
_pool_lock = threading.Lock()


def _build_pool():
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    cflags = ["-I", os.path.join(torch_dir, "include"),
              "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)]
    # at::parallel_for's OpenMP loop is inline in torch's headers: without -fopenmp it would
    # be a serial loop. The library's libgomp.so.1 then binds to the one torch loaded.
    if "ATen parallel backend: OpenMP" in torch.__config__.parallel_info():
        cflags.append("-fopenmp")
    lib_dir = os.path.join(torch_dir, "lib")
    ldflags = ["-L", lib_dir, "-Wl,-rpath," + lib_dir, "-lc10", "-ltorch_cpu"]
    path = _native.build_library("convjit_torch", ["torch_pool.cc"], cflags, ldflags,
                                 "torch " + torch.__version__)
    library = ctypes.CDLL(path)
    if library.convjit_torch_intra_op_parallel() != 1:
        raise _convjit.Error("at::parallel_for is serial in the library built at %s" % path)
    return ctypes.cast(library.convjit_torch_parallel_for, ctypes.c_void_p).value


def _parallel_for():
    """Built on the first CPU run, not at import: importing convjit.torch stays cheap."""
    global _pool_address
    if _pool_address is None:
        with _pool_lock:
            if _pool_address is None:
                try:
                    _pool_address = _build_pool()
                except (_convjit.Error, OSError) as e:
                    warnings.warn("convjit.torch runs its CPU kernels on convjit's own thread "
                                  "pool, not PyTorch's: %s" % e, RuntimeWarning, stacklevel=3)
                    _pool_address = 0
    return _pool_address


def _device_name(t):
    if t.device.type == "cpu":
        return "cpu"
    if t.device.type == "cuda":
        return "cuda:%d" % (t.device.index if t.device.index is not None else torch.cuda.current_device())
    raise RuntimeError("convjit runs CPU and CUDA tensors, but got a tensor on %s" % t.device)


def _run(op, sizes, a, b, strides, padding, explicit_paddings, data_format, dilations):
    tf_op = _TF_NAMES[op]
    if a.dtype != b.dtype:
        raise RuntimeError("%s: the operands have dtypes %s and %s; they must match" %
                           (tf_op, a.dtype, b.dtype))
    if a.device != b.device:
        raise RuntimeError("%s: the operands are on %s and %s; they must be on one device" %
                           (tf_op, a.device, b.device))
    attrs = (tuple(strides), padding, tuple(explicit_paddings), data_format, tuple(dilations))
    a = a.detach().contiguous()
    b = b.detach().contiguous()
    try:
        device = _device_name(a)
        kernel, out_shape = _kernel(op, a.dtype, device, None if sizes is None else tuple(sizes),
                         tuple(a.shape), tuple(b.shape), attrs)
        out = torch.empty(out_shape, dtype=a.dtype, device=a.device)
        kernel.run(a, b, out=out, parallel_for=_parallel_for() if device == "cpu" else 0)
    except _convjit.Error as e:
        raise RuntimeError(str(e)) from None
    return out


def _forward_shape(tf_op, input, filter, strides, padding, explicit_paddings, data_format,
                   dilations):
    """The forward ops' result shape (TensorFlow's rule) for the fake kernels."""
    if input.dim() != 4 or filter.dim() != 4:
        raise RuntimeError("%s: input and filter must be 4-D, but got shapes %s and %s" %
                           (tf_op, list(input.shape), list(filter.shape)))
    return _ops._output_shape(tf_op, tuple(input.shape), tuple(filter.shape), tuple(strides),
                              padding, tuple(explicit_paddings), data_format, tuple(dilations))


# ---- the custom ops

_ATTRS_SCHEMA = ("int[] strides, str padding, int[] explicit_paddings, str data_format, "
                 "int[] dilations")


def _define_forward(name):
    tf_op = _TF_NAMES[name]

    @torch.library.custom_op("convjit::" + name, mutates_args=(),
                             schema="(Tensor input, Tensor filter, %s) -> Tensor" % _ATTRS_SCHEMA)
    def op(input, filter, strides, padding, explicit_paddings, data_format, dilations):
        return _run(name, None, input, filter, strides, padding, explicit_paddings, data_format,
                    dilations)

    @op.register_fake
    def _(input, filter, strides, padding, explicit_paddings, data_format, dilations):
        shape = _forward_shape(tf_op, input, filter, strides, padding, explicit_paddings,
                               data_format, dilations)
        return input.new_empty(shape)

    return op


def _define_backprop_input(name):
    @torch.library.custom_op(
        "convjit::" + name, mutates_args=(),
        schema="(int[] input_sizes, Tensor filter, Tensor out_backprop, %s) -> Tensor" %
        _ATTRS_SCHEMA)
    def op(input_sizes, filter, out_backprop, strides, padding, explicit_paddings, data_format,
           dilations):
        return _run(name, input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
                    data_format, dilations)

    @op.register_fake
    def _(input_sizes, filter, out_backprop, strides, padding, explicit_paddings, data_format,
          dilations):
        return out_backprop.new_empty(list(input_sizes))

    return op


def _define_backprop_filter(name):
    @torch.library.custom_op(
        "convjit::" + name, mutates_args=(),
        schema="(Tensor input, int[] filter_sizes, Tensor out_backprop, %s) -> Tensor" %
        _ATTRS_SCHEMA)
    def op(input, filter_sizes, out_backprop, strides, padding, explicit_paddings, data_format,
           dilations):
        return _run(name, filter_sizes, input, out_backprop, strides, padding, explicit_paddings,
                    data_format, dilations)

    @op.register_fake
    def _(input, filter_sizes, out_backprop, strides, padding, explicit_paddings, data_format,
          dilations):
        return input.new_empty(list(filter_sizes))

    return op


_conv2d_op = _define_forward("conv2d")
_depthwise_op = _define_forward("depthwise_conv2d_native")
_conv2d_input_op = _define_backprop_input("conv2d_backprop_input")
_depthwise_input_op = _define_backprop_input("depthwise_conv2d_native_backprop_input")
_conv2d_filter_op = _define_backprop_filter("conv2d_backprop_filter")
_depthwise_filter_op = _define_backprop_filter("depthwise_conv2d_native_backprop_filter")


# ---- autograd: the forward ops' backward runs convjit's gradient ops

def _setup_context(ctx, inputs, output):
    input, filter = inputs[0], inputs[1]
    ctx.attrs = tuple(inputs[2:])
    ctx.input_shape = list(input.shape)
    ctx.filter_shape = list(filter.shape)
    ctx.save_for_backward(input, filter)


def _make_backward(input_op, filter_op):
    def backward(ctx, grad):
        input, filter = ctx.saved_tensors
        grad = grad.contiguous()
        d_input = d_filter = None
        if ctx.needs_input_grad[0]:
            d_input = input_op(ctx.input_shape, filter, grad, *ctx.attrs)
        if ctx.needs_input_grad[1]:
            d_filter = filter_op(input, ctx.filter_shape, grad, *ctx.attrs)
        return d_input, d_filter, None, None, None, None, None

    return backward


_conv2d_op.register_autograd(_make_backward(_conv2d_input_op, _conv2d_filter_op),
                             setup_context=_setup_context)
_depthwise_op.register_autograd(_make_backward(_depthwise_input_op, _depthwise_filter_op),
                                setup_context=_setup_context)


# ---- TensorFlow's signatures

def _ints(values):
    return [int(v) for v in values]


def conv2d(input, filter, strides, padding, explicit_paddings=(), data_format="NHWC",
           dilations=(1, 1, 1, 1)):
    """tf.raw_ops.Conv2D on torch tensors (filter HWIO); differentiable."""
    return _conv2d_op(input, filter, _ints(strides), padding, _ints(explicit_paddings),
                      data_format, _ints(dilations))


def depthwise_conv2d_native(input, filter, strides, padding, explicit_paddings=(),
                            data_format="NHWC", dilations=(1, 1, 1, 1)):
    """tf.raw_ops.DepthwiseConv2dNative on torch tensors (filter [h, w, in, multiplier]);
    differentiable."""
    return _depthwise_op(input, filter, _ints(strides), padding, _ints(explicit_paddings),
                         data_format, _ints(dilations))


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    """tf.raw_ops.Conv2DBackpropInput on torch tensors."""
    return _conv2d_input_op(_ints(input_sizes), filter, out_backprop, _ints(strides), padding,
                            _ints(explicit_paddings), data_format, _ints(dilations))


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1)):
    """tf.raw_ops.Conv2DBackpropFilter on torch tensors."""
    return _conv2d_filter_op(input, _ints(filter_sizes), out_backprop, _ints(strides), padding,
                             _ints(explicit_paddings), data_format, _ints(dilations))


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           explicit_paddings=(), data_format="NHWC",
                                           dilations=(1, 1, 1, 1)):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropInput on torch tensors."""
    return _depthwise_input_op(_ints(input_sizes), filter, out_backprop, _ints(strides), padding,
                               _ints(explicit_paddings), data_format, _ints(dilations))


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            explicit_paddings=(), data_format="NHWC",
                                            dilations=(1, 1, 1, 1)):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropFilter on torch tensors."""
    return _depthwise_filter_op(input, _ints(filter_sizes), out_backprop, _ints(strides), padding,
                                _ints(explicit_paddings), data_format, _ints(dilations))


# ---- torch.nn.Conv2d

def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise ValueError("%s must be an int or a pair of ints, but got %r" % (name, v))
    return v


class _NhwcOf(torch.autograd.Function):
    """The NHWC (dense) tensor of an [N, C, H, W] tensor, whose gradient comes back in the
    input's own memory format. A plain permute's gradient would be a channels-last-strided
    view of what is an NCHW tensor to the rest of the model: every elementwise op after it
    (ReLU's backward, the skip connection's sum) would then mix layouts and run several times
    slower than the transposing copy made here once."""

    @staticmethod
    def forward(ctx, x):
        ctx.channels_last = x.is_contiguous(memory_format=torch.channels_last)
        return x.permute(0, 2, 3, 1).contiguous()  # free for a channels_last tensor

    @staticmethod
    def backward(ctx, grad):
        grad = grad.permute(0, 3, 1, 2)
        return grad if ctx.channels_last else grad.contiguous()


class Conv2d(torch.nn.Conv2d):
    """A drop-in for ``torch.nn.Conv2d`` whose convolution and its gradients run through convjit.

    Same constructor, parameters (weight OIHW, bias) and state_dict as ``torch.nn.Conv2d``;
    NCHW input by default as PyTorch, or ``data_format="NHWC"`` for channels-last tensors laid
    out [N, H, W, C]. The ops run in the layout of the input's memory (NCHW, or NHWC for
    channels-last memory; depthwise always NHWC) and the result comes back in the input's
    memory format. ``groups`` equal to in_channels with out_channels a multiple of it runs
    ``DepthwiseConv2dNative``, other groups the grouped ``Conv2D``. Padding modes other than
    "zeros" pad with ``torch.nn.functional.pad`` first.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 data_format="NCHW"):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
                         device=device, dtype=dtype)
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError("data_format must be 'NCHW' or 'NHWC', but got %r" % (data_format,))
        self.data_format = data_format

    def extra_repr(self):
        return super().extra_repr() + ", data_format=%s" % self.data_format

    def _tf_attrs(self, data_format):
        """Strides, padding, explicit paddings and dilations for operands in `data_format`."""
        def per_dim(h, w, other):  # four values in data_format's order
            return [other, other, h, w] if data_format == "NCHW" else [other, h, w, other]

        strides = per_dim(*self.stride, 1)
        dilations = per_dim(*self.dilation, 1)
        if self.padding_mode != "zeros":
            return strides, "VALID", [], dilations
        if isinstance(self.padding, str):
            if self.padding == "valid":
                return strides, "VALID", [], dilations
            # torch's "same" (stride 1): the extra row or column of an even window goes after,
            # as TensorFlow's SAME puts it.
            return strides, "SAME", [], dilations
        ph, pw = self.padding
        explicit = [pads for pair in per_dim((ph, ph), (pw, pw), (0, 0)) for pads in pair]
        return strides, "EXPLICIT", explicit, dilations

    def forward(self, input):
        # The layout the ops run in follows the input's memory: channels-last memory (an NHWC
        # module's input, a channels_last tensor) runs NHWC on a free view. NCHW memory runs
        # the NCHW ops directly: convjit's kernels copy each image channels-last inside (cheaper
        # than whole-tensor transposes here: 8x64x56x56 3x3, forward and both gradients on two
        # threads, 13.2 ms against 15.7 ms through transposes). Depthwise is the exception: its
        # NCHW kernels are slower than the transposes, so it runs NHWC between copies. The
        # result comes back in the input's layout and memory format, as torch.nn.Conv2d's.
        if input.dim() == 3:  # unbatched, as torch.nn.Conv2d takes it
            return self.forward(input.unsqueeze(0)).squeeze(0)
        if input.dim() != 4:
            raise RuntimeError("Conv2d: expected a 3-D (unbatched) or 4-D input, but got shape %s"
                               % (list(input.shape),))
        nchw = self.data_format == "NCHW"
        channels_last_in = nchw and input.is_contiguous(memory_format=torch.channels_last)
        x = input if nchw else input.permute(0, 3, 1, 2)  # the NCHW view either way
        if self.padding_mode != "zeros":
            x = torch.nn.functional.pad(x, self._reversed_padding_repeated_twice,
                                        mode=self.padding_mode)
        depthwise = self.groups > 1 and self.groups == self.in_channels
        channels_last_memory = x.is_contiguous(memory_format=torch.channels_last)
        layout = "NCHW" if nchw and not depthwise and not channels_last_memory else "NHWC"
        x = x.contiguous() if layout == "NCHW" else _NhwcOf.apply(x)
        strides, padding, explicit, dilations = self._tf_attrs(layout)
        if depthwise:
            # OIHW with O = in * multiplier, I = 1 -> [h, w, in, multiplier]
            multiplier = self.out_channels // self.in_channels
            filter = self.weight.reshape(self.in_channels, multiplier, *self.kernel_size)
            filter = filter.permute(2, 3, 0, 1).contiguous()
            y = _depthwise_op(x, filter, strides, padding, explicit, layout, dilations)
        else:
            filter = self.weight.permute(2, 3, 1, 0).contiguous()  # OIHW -> HWIO
            y = _conv2d_op(x, filter, strides, padding, explicit, layout, dilations)
        if self.bias is not None:
            y = y + self.bias.reshape((1, -1, 1, 1) if layout == "NCHW" else (1, 1, 1, -1))
        if not nchw:
            return y
        if layout == "NHWC":
            y = y.permute(0, 3, 1, 2)
        # The input's memory format (a no-op but after a padding mode's pad that changed it).
        return y.contiguous(
            memory_format=torch.channels_last if channels_last_in else torch.contiguous_format)
