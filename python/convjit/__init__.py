"""convjit: TensorFlow's convolution gradient ops, JIT-compiled for the exact op instance.

The functions carry TensorFlow's names, argument names and defaults, so a TensorFlow user
needs no manual::

    import numpy as np, convjit
    dy = np.random.rand(8, 28, 28, 128).astype(np.float32)
    w = np.random.rand(3, 3, 128, 128).astype(np.float32)
    dx = convjit.conv2d_backprop_input((8, 28, 28, 128), w, dy, strides=(1, 1, 1, 1), padding="SAME")

Arrays are anything with ``__dlpack__`` or the buffer protocol (NumPy, PyTorch, JAX,
TensorFlow, CuPy); the result is the caller's kind of array (NumPy in, NumPy out). Kernels are
compiled once per op instance and cached in memory and on disk.

- ``conv2d_backprop_input``, ``conv2d_backprop_filter``,
  ``depthwise_conv2d_native_backprop_input``, ``depthwise_conv2d_native_backprop_filter``,
  ``conv2d``, ``depthwise_conv2d_native``: compute one op.
- ``compile(op, **attrs)`` returns a ``Kernel`` to run many times.
- ``convjit.cache``: the on-disk kernel cache (``list``, ``stats``, ``purge``).
- ``Error``: every failure, a ``ValueError`` with TensorFlow's message text.

Framework adapters, imported on their own (docs/FRAMEWORKS.md): ``convjit.torch`` (custom ops,
autograd, ``Conv2d``), ``convjit.jax`` (XLA FFI custom calls, differentiable, jit/vmap),
``convjit.tf`` (the ``Convjit*`` TensorFlow ops and their gradients) and ``convjit.keras``
(``Conv2D``, ``DepthwiseConv2D``).
"""

from ._convjit import Error, Kernel, __version__
from ._ops import (
    compile,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)
from ._paths import get_cmake_dir, get_include, get_library_dir
from . import cache

__all__ = [
    "Error",
    "Kernel",
    "__version__",
    "cache",
    "compile",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "get_cmake_dir",
    "get_include",
    "get_library_dir",
]
