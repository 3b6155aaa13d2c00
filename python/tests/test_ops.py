"""Every op x dtype x layout through the TensorFlow-named functions, against the NumPy
reference; plus strides, dilations, each padding mode and the out= path."""

import itertools

import numpy as np
import pytest

import convjit
from reference import OPS, numpy_dtype, output_shape, reference, tolerance

DTYPES = ("float16", "bfloat16", "float32", "float64")
LAYOUTS = ("NHWC", "NCHW")
FUNCTIONS = {
    "Conv2D": convjit.conv2d,
    "Conv2DBackpropInput": convjit.conv2d_backprop_input,
    "Conv2DBackpropFilter": convjit.conv2d_backprop_filter,
    "DepthwiseConv2dNative": convjit.depthwise_conv2d_native,
    "DepthwiseConv2dNativeBackpropInput": convjit.depthwise_conv2d_native_backprop_input,
    "DepthwiseConv2dNativeBackpropFilter": convjit.depthwise_conv2d_native_backprop_filter,
}
# (input NHWC, filter HW, in/out channels or multiplier, strides HW, dilations HW, padding, explicit HW pads)
GEOMETRIES = {
    "same_stride2": ((2, 9, 7, 3), (3, 3), 5, (2, 2), (1, 1), "SAME", None),
    "valid_dilated": ((1, 8, 9, 4), (2, 3), 3, (2, 2), (2, 1), "VALID", None),
    "explicit": ((2, 6, 5, 2), (3, 2), 4, (1, 1), (1, 1), "EXPLICIT", ((1, 2), (0, 1))),
}


def grid(rng, shape, dtype):
    """Values k/8 with |k| <= 8: exact in every dtype, so only the result's rounding differs."""
    return (rng.integers(-8, 9, size=shape) / 8.0).astype(numpy_dtype(dtype))


def layout(shape_nhwc, data_format):
    n, h, w, c = shape_nhwc
    return (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)


def attrs_for(data_format, strides_hw, dilations_hw, padding, explicit_hw):
    strides = layout((1, strides_hw[0], strides_hw[1], 1), data_format)
    dilations = layout((1, dilations_hw[0], dilations_hw[1], 1), data_format)
    explicit = ()
    if padding == "EXPLICIT":
        pads = {"N": (0, 0), "H": explicit_hw[0], "W": explicit_hw[1], "C": (0, 0)}
        explicit = tuple(p for axis in data_format for p in pads[axis])
    return strides, dilations, explicit


def make_case(op, dtype, data_format, geometry, seed=0):
    input_nhwc, (kh, kw), channels, strides_hw, dilations_hw, padding, explicit_hw = GEOMETRIES[geometry]
    rng = np.random.default_rng(seed)
    depthwise = op.startswith("Depthwise")
    filter_shape = (kh, kw, input_nhwc[3], 2 if depthwise else channels)
    input_shape = layout(input_nhwc, data_format)
    strides, dilations, explicit = attrs_for(data_format, strides_hw, dilations_hw, padding, explicit_hw)
    out_shape = output_shape(op, input_shape, filter_shape, strides, padding, explicit, data_format, dilations)
    if op.endswith("BackpropInput"):
        a, b, sizes = grid(rng, filter_shape, dtype), grid(rng, out_shape, dtype), input_shape
    elif op.endswith("BackpropFilter"):
        a, b, sizes = grid(rng, input_shape, dtype), grid(rng, out_shape, dtype), filter_shape
    else:
        a, b, sizes = grid(rng, input_shape, dtype), grid(rng, filter_shape, dtype), None
    attrs = dict(strides=strides, padding=padding, explicit_paddings=explicit, data_format=data_format,
                 dilations=dilations)
    return a, b, sizes, attrs


def call(op, a, b, sizes, attrs, **extra):
    function = FUNCTIONS[op]
    if sizes is None:
        return function(a, b, **attrs, **extra)
    if op.endswith("BackpropInput"):
        return function(sizes, a, b, **attrs, **extra)
    return function(a, sizes, b, **attrs, **extra)


def check(op, dtype, result, a, b, sizes, attrs):
    expected = reference(op, a.astype(np.float64), b.astype(np.float64), sizes, **attrs)
    assert isinstance(result, np.ndarray)
    assert result.dtype == numpy_dtype(dtype)
    assert result.shape == expected.shape
    reduction = max(a.size, b.size) // max(1, expected.size) + 1
    error = np.max(np.abs(result.astype(np.float64) - expected)) if expected.size else 0.0
    assert error <= tolerance(dtype, expected, reduction), (op, dtype, error)


@pytest.mark.parametrize("op,dtype,data_format", list(itertools.product(OPS, DTYPES, LAYOUTS)))
def test_every_op_dtype_and_layout(op, dtype, data_format):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 NumPy arrays need ml_dtypes")
    a, b, sizes, attrs = make_case(op, dtype, data_format, "same_stride2")
    check(op, dtype, call(op, a, b, sizes, attrs), a, b, sizes, attrs)


@pytest.mark.parametrize("op,geometry,data_format",
                         list(itertools.product(OPS, ("valid_dilated", "explicit"), LAYOUTS)))
def test_strides_dilations_and_padding_modes(op, geometry, data_format):
    a, b, sizes, attrs = make_case(op, "float32", data_format, geometry, seed=1)
    check(op, "float32", call(op, a, b, sizes, attrs), a, b, sizes, attrs)


@pytest.mark.parametrize("op", OPS)
def test_out_is_written_in_place(op):
    a, b, sizes, attrs = make_case(op, "float32", "NHWC", "same_stride2", seed=2)
    fresh = call(op, a, b, sizes, attrs)
    out = np.full(fresh.shape, np.nan, dtype=np.float32)
    returned = call(op, a, b, sizes, attrs, out=out)
    assert returned is out
    np.testing.assert_array_equal(out, fresh)


def test_results_share_memory_with_nothing():
    a, b, sizes, attrs = make_case("Conv2DBackpropInput", "float32", "NHWC", "same_stride2")
    first = call("Conv2DBackpropInput", a, b, sizes, attrs)
    second = call("Conv2DBackpropInput", a, b, sizes, attrs)
    assert not np.shares_memory(first, second)
    assert first.flags["C_CONTIGUOUS"] and first.flags["WRITEABLE"] and first.flags["OWNDATA"] is False
    assert first.ctypes.data % 64 == 0
    np.testing.assert_array_equal(first, second)


def test_input_sizes_may_be_any_integer_sequence():
    a, b, sizes, attrs = make_case("Conv2DBackpropInput", "float32", "NHWC", "same_stride2")
    expected = call("Conv2DBackpropInput", a, b, sizes, attrs)
    for spelling in (list(sizes), np.array(sizes, dtype=np.int32), tuple(np.int64(s) for s in sizes)):
        np.testing.assert_array_equal(call("Conv2DBackpropInput", a, b, spelling, attrs), expected)
