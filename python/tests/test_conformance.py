"""TensorFlow's own test cases (../shared/conformance/tf_cases.json) through the Python API:
hard-coded expected values where TensorFlow's tests have them, the NumPy reference for the
other configurations, and convjit.Error for every case TensorFlow rejects."""

import json
import random
import re

import numpy as np
import pytest

import convjit
from conftest import SHARED
from reference import numpy_dtype, reference, tolerance
from test_ops import FUNCTIONS

CASES_FILE = SHARED / "conformance" / "tf_cases.json"
CASES = json.loads(CASES_FILE.read_text()) if CASES_FILE.exists() else []
pytestmark = pytest.mark.skipif(not CASES, reason="shared test data not found at %s" % CASES_FILE)


def sizes_value(value, name):
    """A size vector, or the random one a fuzz case describes ("random int32 vector of length 3")."""
    if isinstance(value, list):
        return value
    length = int(re.search(r"length[ -](\d+)", value).group(1)) if re.search(r"length[ -](\d+)", value) else 0
    rng = random.Random(name)
    return [rng.randint(-2**31, 2**31 - 1) for _ in range(length)]


def nhwc_of(shape):
    n, c, h, w = shape
    return (n, h, w, c)


def arange(shape, dtype, transposed_from_nhwc):
    """1..n in row-major order; for TensorFlow's NCHW variants, made in NHWC and transposed."""
    if transposed_from_nhwc:
        nhwc = np.arange(1, np.prod(nhwc_of(shape)) + 1).reshape(nhwc_of(shape))
        return np.ascontiguousarray(np.transpose(nhwc, (0, 3, 1, 2))).astype(dtype)
    return np.arange(1, int(np.prod(shape)) + 1).reshape(shape).astype(dtype)


def operands(case, dtype, generated):
    op = case["op"]
    transposed = "TRANSPOSED" in case.get("input_generation_rule", "")
    output = tuple(case.get("output_sizes", ()))
    filter_sizes = tuple(case["filter_sizes"])
    input_shape = tuple(case.get("input_shape") or case.get("input_sizes") or ())
    make = (lambda shape, t=False: arange(shape, dtype, t)) if generated else (
        lambda shape, t=False: (np.random.default_rng(len(shape) + sum(shape)).integers(-8, 9, size=shape) / 8).astype(dtype))
    if op.endswith("BackpropInput"):
        return make(filter_sizes), make(output, transposed), sizes_value(case["input_sizes"], case["name"])
    if op.endswith("BackpropFilter"):
        return make(input_shape, transposed), make(output, transposed), sizes_value(case["filter_sizes"], case["name"])
    return make(input_shape), make(filter_sizes), None


def run(case, a, b, sizes):
    attrs = dict(strides=case["strides"], padding=case["padding"],
                 explicit_paddings=case.get("explicit_paddings") or (),
                 data_format=case.get("data_format") or "NHWC",
                 dilations=case.get("dilations") or (1, 1, 1, 1))
    function = FUNCTIONS[case["op"].replace("Conv2DBackpropInputV2", "Conv2DBackpropInput")]
    if sizes is None:
        return function(a, b, **attrs), attrs
    if case["op"].endswith("BackpropInput"):
        return function(sizes, a, b, **attrs), attrs
    return function(a, sizes, b, **attrs), attrs


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conformance_case(case):
    dtype_name = case.get("dtype", "float32")
    if dtype_name == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 NumPy arrays need ml_dtypes")
    dtype = numpy_dtype(dtype_name)
    if "expect_error" in case:
        a, b, sizes = operands(case, dtype, generated=False)
        with pytest.raises(convjit.Error):
            run(case, a, b, sizes)
        return
    hard_coded = "expected" in case
    a, b, sizes = operands(case, dtype, generated=hard_coded)
    result, attrs = run(case, a, b, sizes)
    if hard_coded:
        expected = np.asarray(case["expected"], dtype=np.float64).reshape(result.shape)
    else:
        expected = reference(case["op"].replace("V2", ""), a, b, sizes, **attrs)
    assert result.shape == expected.shape
    reduction = max(a.size, b.size) // max(1, expected.size) + 1
    error = float(np.max(np.abs(result.astype(np.float64) - expected))) if expected.size else 0.0
    assert error <= tolerance(dtype_name, expected, reduction), error
