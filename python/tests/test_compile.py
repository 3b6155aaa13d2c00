"""convjit.compile and convjit.Kernel."""

import numpy as np
import pytest

import convjit

ATTRS = dict(input_sizes=(2, 9, 9, 3), filter=(3, 3, 3, 5), strides=(1, 2, 2, 1), padding="SAME")


def test_kernel_describes_itself_and_matches_the_function():
    kernel = convjit.compile("conv2d_backprop_input", **ATTRS)
    assert kernel.backend in ("x86", "interpreter")
    assert kernel.device == "cpu" and kernel.workspace_bytes == 0
    assert kernel.op == "Conv2DBackpropInput" and kernel.dtype == "float32"
    assert kernel.descriptor.startswith("Conv2DBackpropInput dtype=float32")
    assert kernel.name and kernel.name in repr(kernel)
    assert kernel.operand_shapes == ((3, 3, 3, 5), (2, 5, 5, 5), (2, 9, 9, 3))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    dy = rng.standard_normal((2, 5, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(kernel.run(w, dy),
                                  convjit.conv2d_backprop_input((2, 9, 9, 3), w, dy, (1, 2, 2, 1), "SAME"))


@pytest.mark.parametrize("dtype", ["float16", "half", np.float16, np.dtype("float16")])
def test_dtype_spellings(dtype):
    assert convjit.compile("Conv2DBackpropInput", dtype=dtype, **ATTRS).dtype == "float16"


def test_framework_dtypes():
    torch = pytest.importorskip("torch")
    assert convjit.compile("conv2d_backprop_input", dtype=torch.bfloat16, **ATTRS).dtype == "bfloat16"


@pytest.mark.parametrize("op,attrs,shapes", [
    ("conv2d", dict(input=(1, 6, 6, 2), filter=(3, 3, 2, 4)), ((1, 6, 6, 2), (3, 3, 2, 4), (1, 6, 6, 4))),
    ("conv2d_backprop_filter", dict(input=(1, 6, 6, 2), filter_sizes=(3, 3, 2, 4)),
     ((1, 6, 6, 2), (1, 6, 6, 4), (3, 3, 2, 4))),
    ("depthwise_conv2d_native", dict(input=(1, 6, 6, 2), filter=(3, 3, 2, 3)),
     ((1, 6, 6, 2), (3, 3, 2, 3), (1, 6, 6, 6))),
    ("DepthwiseConv2dNativeBackpropInput", dict(input_sizes=(1, 6, 6, 2), filter=(3, 3, 2, 3)),
     ((3, 3, 2, 3), (1, 6, 6, 6), (1, 6, 6, 2))),
    ("depthwise_conv2d_native_backprop_filter", dict(input=(1, 6, 6, 2), filter_sizes=(3, 3, 2, 3)),
     ((1, 6, 6, 2), (1, 6, 6, 6), (3, 3, 2, 3))),
])
def test_every_op_compiles_with_out_backprop_derived(op, attrs, shapes):
    kernel = convjit.compile(op, strides=(1, 1, 1, 1), padding="SAME", **attrs)
    assert kernel.operand_shapes == shapes


def test_run_with_out_and_wrong_argument_count():
    kernel = convjit.compile("conv2d_backprop_input", **ATTRS)
    w, dy = np.ones((3, 3, 3, 5), np.float32), np.ones((2, 5, 5, 5), np.float32)
    out = np.zeros((2, 9, 9, 3), np.float32)
    assert kernel.run(w, dy, out=out) is out and out.any()
    with pytest.raises(convjit.Error, match="takes 2 arrays"):
        kernel.run(w)


@pytest.mark.parametrize("call,message", [
    (lambda: convjit.compile("conv3d", **ATTRS), "unknown op 'conv3d'"),
    (lambda: convjit.compile("conv2d_backprop_input", bogus=1, **ATTRS), "unknown attribute"),
    (lambda: convjit.compile("conv2d_backprop_input", input_sizes=(1, 4, 4, 1), filter=(2, 2, 1, 1)),
     "needs strides and padding"),
    (lambda: convjit.compile("conv2d", input=(1, 4, 4, 1), filter_sizes=(2, 2, 1, 1), strides=(1, 1, 1, 1),
                             padding="SAME"), "takes no filter_sizes"),
    (lambda: convjit.compile("conv2d_backprop_input", dtype="int8", **ATTRS), "Value for attr 'T' of int8"),
    (lambda: convjit.compile("conv2d_backprop_input", device="tpu", **ATTRS), "unknown device 'tpu'"),
    (lambda: convjit.compile("conv2d_backprop_input", backend="nosuch", **ATTRS), "nosuch"),
])
def test_bad_compile_requests(call, message):
    with pytest.raises(convjit.Error, match=message):
        call()


def test_cuda_device_without_the_cuda_backend_is_a_clear_error():
    try:
        kernel = convjit.compile("conv2d_backprop_input", device="cuda:0", **ATTRS)
    except convjit.Error as error:
        assert "cuda" in str(error)
        assert error.status in ("UNIMPLEMENTED", "UNAVAILABLE")
    else:  # a build with the CUDA backend on a machine with a GPU
        assert kernel.device == "cuda:0"
