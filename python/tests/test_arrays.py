"""Arrays in and out: DLPack and the buffer protocol from NumPy, PyTorch, JAX and TensorFlow,
results of the caller's kind, device arrays routed to device "cuda:N", and every bad array or
attribute refused with convjit.Error."""

import numpy as np
import pytest

import convjit
from conftest import optional_module
from dlpack_fake import FakeDeviceArray

SIZES = (2, 8, 8, 4)
STRIDES = (1, 1, 1, 1)


def operands(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.integers(-8, 9, size=(3, 3, 4, 6)) / 8).astype(dtype)
    dy = (rng.integers(-8, 9, size=(2, 8, 8, 6)) / 8).astype(dtype)
    return w, dy


def expected(w, dy):
    return convjit.conv2d_backprop_input(SIZES, np.asarray(w, np.float32), np.asarray(dy, np.float32),
                                         STRIDES, "SAME")


class DLPackOnly:
    """Exposes an array through __dlpack__ alone."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_from_numpy():
    w, dy = operands()
    result = convjit.conv2d_backprop_input(SIZES, DLPackOnly(w), DLPackOnly(dy), STRIDES, "SAME")
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, expected(w, dy))


def test_buffer_protocol_memoryview():
    w, dy = operands()
    result = convjit.conv2d_backprop_input(SIZES, memoryview(w), memoryview(dy), STRIDES, "SAME")
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, expected(w, dy))


def test_numpy_float16_and_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in (np.float16, ml_dtypes.bfloat16):
        w, dy = operands(dtype)
        result = convjit.conv2d_backprop_input(SIZES, w, dy, STRIDES, "SAME")
        assert result.dtype == np.dtype(dtype)
        np.testing.assert_allclose(result.astype(np.float32), expected(w, dy), rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(optional_module("torch") is None, reason="PyTorch is not installed")
def test_pytorch_tensors_in_and_out():
    import torch

    w, dy = operands()
    tw, tdy = torch.from_numpy(w), torch.from_numpy(dy)
    result = convjit.conv2d_backprop_input(SIZES, tw, tdy, STRIDES, "SAME")
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
    np.testing.assert_array_equal(result.numpy(), expected(w, dy))
    out = torch.empty(SIZES)
    assert convjit.conv2d_backprop_input(SIZES, tw, tdy, STRIDES, "SAME", out=out) is out
    np.testing.assert_array_equal(out.numpy(), expected(w, dy))
    bf = convjit.conv2d_backprop_input(SIZES, tw.to(torch.bfloat16), tdy.to(torch.bfloat16), STRIDES, "SAME")
    assert bf.dtype == torch.bfloat16
    np.testing.assert_allclose(bf.float().numpy(), expected(w, dy), rtol=1e-2, atol=1e-2)
    with pytest.raises(convjit.Error, match="C-contiguous"):
        convjit.conv2d_backprop_input(SIZES, tw, tdy.permute(0, 2, 1, 3), STRIDES, "SAME")


@pytest.mark.skipif(optional_module("jax") is None, reason="JAX is not installed")
def test_jax_arrays_in_and_out():
    import jax.numpy as jnp

    w, dy = operands()
    result = convjit.conv2d_backprop_input(SIZES, jnp.asarray(w), jnp.asarray(dy), STRIDES, "SAME")
    assert type(result).__module__.split(".")[0] in ("jax", "jaxlib")
    np.testing.assert_array_equal(np.asarray(result), expected(w, dy))
    bf = convjit.conv2d_backprop_input(SIZES, jnp.asarray(w, jnp.bfloat16), jnp.asarray(dy, jnp.bfloat16),
                                       STRIDES, "SAME")
    assert bf.dtype == jnp.bfloat16
    with pytest.raises(convjit.Error, match="immutable"):
        convjit.conv2d_backprop_input(SIZES, w, dy, STRIDES, "SAME", out=jnp.zeros(SIZES))


@pytest.mark.skipif(optional_module("tensorflow") is None, reason="TensorFlow is not installed")
def test_tensorflow_tensors_in_and_out():
    import tensorflow as tf

    w, dy = operands()
    result = convjit.conv2d_backprop_input(SIZES, tf.constant(w), tf.constant(dy), STRIDES, "SAME")
    assert isinstance(result, tf.Tensor)
    want = tf.raw_ops.Conv2DBackpropInput(input_sizes=list(SIZES), filter=w, out_backprop=dy,
                                          strides=list(STRIDES), padding="SAME")
    np.testing.assert_allclose(result.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


# ---- bad arrays


def test_wrong_dtype():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="Value for attr 'T' of int32 is not in the list"):
        convjit.conv2d_backprop_input(SIZES, w.astype(np.int32), dy, STRIDES, "SAME")
    with pytest.raises(convjit.Error, match="expected to be a float tensor but is a double tensor"):
        convjit.conv2d_backprop_input(SIZES, w, dy.astype(np.float64), STRIDES, "SAME")


def test_non_contiguous_array():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="out_backprop must be C-contiguous"):
        convjit.conv2d_backprop_input(SIZES, w, np.asfortranarray(dy), STRIDES, "SAME")
    with pytest.raises(convjit.Error, match="C-contiguous"):
        convjit.conv2d_backprop_input(SIZES, w, np.zeros((2, 8, 16, 6), np.float32)[:, :, ::2], STRIDES, "SAME")


def test_wrong_rank_and_not_an_array():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="must be 4-dimensional"):
        convjit.conv2d_backprop_input(SIZES, w[0], dy, STRIDES, "SAME")
    with pytest.raises(convjit.Error, match="must be an array"):
        convjit.conv2d_backprop_input(SIZES, w.tolist(), dy, STRIDES, "SAME")


def test_wrong_shape_for_the_op():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="Conv2DBackpropInput"):
        convjit.conv2d_backprop_input(SIZES, w, dy[:, :4], STRIDES, "SAME")
    kernel = convjit.compile("conv2d_backprop_input", input_sizes=SIZES, filter=w.shape, strides=STRIDES,
                             padding="SAME")
    with pytest.raises(convjit.Error, match=r"out_backprop has shape \(2, 4, 8, 6\) but this kernel expects"):
        kernel.run(w, np.ascontiguousarray(dy[:, :4]))
    with pytest.raises(convjit.Error, match="out has shape"):
        kernel.run(w, dy, out=np.zeros((2, 8, 8, 5), np.float32))
    with pytest.raises(convjit.Error, match="out is a float64 array but the result is float32"):
        kernel.run(w, dy, out=np.zeros(SIZES, np.float64))


def test_out_that_aliases_an_input():
    w, dy = operands()
    big = np.zeros(dy.size + 1024, np.float32)
    dy_view = big[:dy.size].reshape(dy.shape)
    dy_view[...] = dy
    out = big[256:256 + int(np.prod(SIZES))].reshape(SIZES)
    with pytest.raises(convjit.Error, match="out shares memory with out_backprop"):
        convjit.conv2d_backprop_input(SIZES, w, dy_view, STRIDES, "SAME", out=out)


def test_read_only_out():
    w, dy = operands()
    out = np.zeros(SIZES, np.float32)
    out.flags.writeable = False
    with pytest.raises(convjit.Error):
        convjit.conv2d_backprop_input(SIZES, w, dy, STRIDES, "SAME", out=out)


# ---- bad attributes


@pytest.mark.parametrize("attrs,message", [
    (dict(strides=(2, 1, 1, 1)), "strides in the batch and depth dimensions"),
    (dict(strides=(1, 1, 1)), "Sliding window strides field must specify 4 dimensions"),
    (dict(padding="FOO"), "padding"),
    (dict(data_format="NCWH"), "data format"),
    (dict(dilations=(1, 0, 1, 1)), "Dilated rates should be larger than 0"),
    (dict(padding="EXPLICIT", explicit_paddings=(0, 0, 1, 1)), "explicit_paddings"),
    (dict(strides="1111"), "integers"),
])
def test_bad_attributes(attrs, message):
    w, dy = operands()
    args = dict(strides=STRIDES, padding="SAME")
    args.update(attrs)
    with pytest.raises(convjit.Error, match=message):
        convjit.conv2d_backprop_input(SIZES, w, dy, **args)


def test_bad_input_sizes():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="input_sizes"):
        convjit.conv2d_backprop_input((2, 8, 8), w, dy, STRIDES, "SAME")
    with pytest.raises(convjit.Error):
        convjit.conv2d_backprop_input((2, 8, 8, 5), w, dy, STRIDES, "SAME")


def test_error_is_a_value_error_with_a_status():
    w, dy = operands()
    with pytest.raises(ValueError) as info:
        convjit.conv2d_backprop_input(SIZES, w, dy, (2, 1, 1, 1), "SAME")
    assert isinstance(info.value, convjit.Error)
    assert info.value.status == "UNIMPLEMENTED"


# ---- device arrays


def test_cuda_arrays_compile_for_their_device():
    w = FakeDeviceArray((3, 3, 4, 6), device_id=1)
    dy = FakeDeviceArray((2, 8, 8, 6), device_id=1)
    # Without the CUDA backend compile() says there is none for cuda:1; with it, on a machine
    # without a driver, that there is no CUDA device. Never a CPU kernel run on device memory.
    with pytest.raises(convjit.Error, match="cuda:1|no CUDA device") as info:
        convjit.conv2d_backprop_input(SIZES, w, dy, STRIDES, "SAME")
    assert "no backend for device" in str(info.value) or info.value.status != "INVALID_ARGUMENT"


def test_arrays_on_two_devices_are_refused():
    w, dy = operands()
    with pytest.raises(convjit.Error, match="is on cpu but out_backprop is on cuda:0"):
        convjit.conv2d_backprop_input(SIZES, w, FakeDeviceArray(dy.shape), STRIDES, "SAME")


def test_a_cpu_kernel_refuses_device_arrays():
    w, dy = operands()
    kernel = convjit.compile("conv2d_backprop_input", input_sizes=SIZES, filter=w.shape, strides=STRIDES,
                             padding="SAME")
    with pytest.raises(convjit.Error, match="is on cuda:0 but the kernel was compiled for cpu"):
        kernel.run(FakeDeviceArray(w.shape), FakeDeviceArray(dy.shape))


def test_unsupported_device_type():
    with pytest.raises(convjit.Error, match="DLPack device type 4"):
        convjit.conv2d_backprop_input(SIZES, FakeDeviceArray((3, 3, 4, 6), device_type=4),
                                      FakeDeviceArray((2, 8, 8, 6), device_type=4), STRIDES, "SAME")
