"""convjit.jax: the XLA FFI custom calls against jax.lax.conv_general_dilated and its
gradients, under jit, grad and vmap. Small random shapes so the file runs in seconds (the FFI
library is built once per test session into a private directory)."""

import random
import zlib

import numpy as np
import pytest

from conftest import optional_module, require_convjit_device

jax = optional_module("jax")
pytestmark = pytest.mark.skipif(jax is None, reason="JAX is not installed")

if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.test_util import check_grads
    import convjit
    import convjit.jax as cj

DTYPES = ["float32", "float64", "bfloat16", "float16"]
TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "bfloat16": 3e-2, "float16": 3e-3}


def _case(rng, depthwise):
    n, h, w, c = rng.randint(1, 3), rng.randint(4, 9), rng.randint(4, 9), rng.randint(1, 5)
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    o = rng.randint(1, 3) if depthwise else rng.randint(1, 6)
    sh = rng.randint(1, 2)
    sw = sh if depthwise else rng.randint(1, 2)
    dh, dw = (1, 1) if (sh, sw) != (1, 1) else (rng.randint(1, 2), rng.randint(1, 2))
    pad = rng.choice(["VALID", "SAME", "EXPLICIT"])
    ph, pw = (rng.randint(0, 2), rng.randint(0, 2)) if pad == "EXPLICIT" else (0, 0)
    return (n, h, w, c), (kh, kw, c, o), (sh, sw), (dh, dw), pad, (ph, pw)


def _attrs(fmt, s, d, pad, p):
    if fmt == "NHWC":
        strides, dilations = (1, s[0], s[1], 1), (1, d[0], d[1], 1)
        explicit = (0, 0, p[0], p[0], p[1], p[1], 0, 0) if pad == "EXPLICIT" else ()
    else:
        strides, dilations = (1, 1, s[0], s[1]), (1, 1, d[0], d[1])
        explicit = (0, 0, 0, 0, p[0], p[0], p[1], p[1]) if pad == "EXPLICIT" else ()
    return dict(strides=strides, padding=pad, explicit_paddings=explicit, data_format=fmt,
                dilations=dilations)


def _lax_conv(x, filter, fmt, s, d, pad, p, depthwise):
    """JAX's own convolution with TensorFlow's semantics, in float64."""
    if depthwise:
        kh, kw, c, m = filter.shape
        filter = filter.reshape(kh, kw, 1, c * m)
    padding = [(p[0], p[0]), (p[1], p[1])] if pad == "EXPLICIT" else pad
    return jax.lax.conv_general_dilated(
        x.astype(jnp.float64), filter.astype(jnp.float64), window_strides=s, padding=padding,
        rhs_dilation=d, dimension_numbers=(fmt, "HWIO", fmt),
        feature_group_count=x.shape[fmt.index("C")] if depthwise else 1)


def _close(got, want, dtype):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got - want).max()) if got.size else 0.0
    assert err <= TOLERANCE[dtype] * scale, "max error %g" % err


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_match_lax(depthwise, fmt, dtype):
    rng = random.Random(zlib.crc32(("%s-%s-%s" % (depthwise, fmt, dtype)).encode()))
    np_rng = np.random.default_rng(rng.randint(0, 1000))
    for _ in range(3):
        (n, h, w, c), fshape, s, d, pad, p = _case(rng, depthwise)
        attrs = _attrs(fmt, s, d, pad, p)
        xshape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
        x = jnp.asarray(np_rng.standard_normal(xshape)).astype(dtype)
        filter = jnp.asarray(np_rng.standard_normal(fshape)).astype(dtype)
        want, vjp = jax.vjp(lambda a, b: _lax_conv(a, b, fmt, s, d, pad, p, depthwise),
                            x.astype(jnp.float64), filter.astype(jnp.float64))
        forward = cj.depthwise_conv2d_native if depthwise else cj.conv2d
        y = jax.jit(lambda a, b: forward(a, b, **attrs))(x, filter)
        assert y.dtype == jnp.dtype(dtype)
        _close(y, want, dtype)

        dy = jnp.asarray(np_rng.standard_normal(want.shape)).astype(dtype)
        want_dx, want_dw = vjp(dy.astype(jnp.float64))
        if depthwise:
            dx = cj.depthwise_conv2d_native_backprop_input(x.shape, filter, dy, **attrs)
            dw = cj.depthwise_conv2d_native_backprop_filter(x, filter.shape, dy, **attrs)
        else:
            dx = cj.conv2d_backprop_input(x.shape, filter, dy, **attrs)
            dw = cj.conv2d_backprop_filter(x, filter.shape, dy, **attrs)
        _close(dx, want_dx, dtype)
        _close(dw, want_dw, dtype)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_grad_matches_lax_and_check_grads(depthwise):
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((2, 6, 5, 3)))
    filter = jnp.asarray(rng.standard_normal((3, 2, 3, 2)))
    attrs = _attrs("NHWC", (2, 2), (1, 1), "EXPLICIT", (1, 0))
    forward = cj.depthwise_conv2d_native if depthwise else cj.conv2d

    def loss(a, b):
        return jnp.sum(jnp.sin(forward(a, b, **attrs)))

    def ref_loss(a, b):
        return jnp.sum(jnp.sin(_lax_conv(a, b, "NHWC", (2, 2), (1, 1), "EXPLICIT", (1, 0),
                                         depthwise)))

    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, filter)
    want = jax.grad(ref_loss, argnums=(0, 1))(x, filter)
    _close(got[0], want[0], "float64")
    _close(got[1], want[1], "float64")
    check_grads(lambda a, b: forward(a, b, **attrs), (x, filter), order=1, modes=("rev",))


def test_vmap_folds_activations_and_maps_the_rest():
    rng = np.random.default_rng(4)
    xs = jnp.asarray(rng.standard_normal((3, 2, 5, 5, 2)))
    filter = jnp.asarray(rng.standard_normal((3, 3, 2, 4)))
    attrs = dict(strides=(1, 1, 1, 1), padding="SAME")
    got = jax.vmap(lambda x: cj.conv2d(x, filter, **attrs))(xs)
    want = jnp.stack([_lax_conv(x, filter, "NHWC", (1, 1), (1, 1), "SAME", (0, 0), False)
                      for x in xs])
    _close(got, want, "float64")
    # A vmapped filter: one call per slice.
    filters = jnp.asarray(rng.standard_normal((3, 3, 3, 2, 4)))
    got = jax.vmap(lambda x, w: cj.conv2d(x, w, **attrs))(xs, filters)
    want = jnp.stack([_lax_conv(x, w, "NHWC", (1, 1), (1, 1), "SAME", (0, 0), False)
                      for x, w in zip(xs, filters)])
    _close(got, want, "float64")
    # Per-example gradients (the filter gradient of vmapped operands).
    per_example = jax.vmap(jax.grad(lambda w, x: jnp.sum(cj.conv2d(x[None], w, **attrs) ** 2)),
                           in_axes=(None, 0))(filter, xs[:, 0])
    want = jnp.stack([jax.grad(lambda w: jnp.sum(_lax_conv(
        x[None], w, "NHWC", (1, 1), (1, 1), "SAME", (0, 0), False) ** 2))(filter)
        for x in xs[:, 0]])
    _close(per_example, want, "float64")


def test_errors_carry_tensorflow_messages():
    x = jnp.ones((1, 5, 5, 2), jnp.float32)
    w = jnp.ones((3, 3, 2, 4), jnp.float32)
    with pytest.raises(convjit.Error, match="strides in the batch and depth dimensions"):
        cj.conv2d(x, w, (2, 1, 1, 1), "SAME")
    with pytest.raises(convjit.Error, match="padding"):
        jax.jit(lambda a, b: cj.conv2d(a, b, (1, 1, 1, 1), "FULL"))(x, w)
    with pytest.raises(convjit.Error, match="4-dimensional"):
        cj.conv2d(x[0], w, (1, 1, 1, 1), "SAME")
    with pytest.raises(convjit.Error, match="int32"):
        cj.conv2d(x.astype(jnp.int32), w.astype(jnp.int32), (1, 1, 1, 1), "SAME")
    with pytest.raises(convjit.Error, match="static"):
        jax.jit(lambda s, b, dy: cj.conv2d_backprop_input(s, b, dy, (1, 1, 1, 1), "SAME"))(
            jnp.array([1, 5, 5, 2]), w, jnp.ones((1, 5, 5, 4), jnp.float32))


def test_cuda_handler_is_built_beside_the_cpu_one():
    # Registered for JAX's CUDA platform when the library loads; run by the GPU test below.
    lib = cj._library()
    assert lib.ConvjitOp and lib.ConvjitOpCuda


def _gpu_or_skip():
    """JAX's first GPU, where convjit can compile for it; else the test skips, saying why."""
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU here")
    require_convjit_device("cuda:%d" % gpu.id)
    return gpu


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ops_on_gpu_arrays_match_lax(depthwise, dtype):
    # The CUDA handler: kernels compiled for the arrays' device, queued on XLA's stream, the
    # workspace (split-K filter gradients) from XLA's allocator.
    gpu = _gpu_or_skip()
    rng = random.Random(zlib.crc32(("gpu-%s-%s" % (depthwise, dtype)).encode()))
    np_rng = np.random.default_rng(rng.randint(0, 1000))
    for fmt in ("NHWC", "NCHW"):
        (n, h, w, c), fshape, s, d, pad, p = _case(rng, depthwise)
        attrs = _attrs(fmt, s, d, pad, p)
        xshape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
        x = jax.device_put(jnp.asarray(np_rng.standard_normal(xshape)).astype(dtype), gpu)
        filter = jax.device_put(jnp.asarray(np_rng.standard_normal(fshape)).astype(dtype), gpu)
        forward = cj.depthwise_conv2d_native if depthwise else cj.conv2d

        def loss(a, b):
            return jnp.sum(forward(a, b, **attrs).astype(jnp.float32) ** 2)

        y = jax.jit(lambda a, b: forward(a, b, **attrs))(x, filter)
        assert y.devices() == {gpu}
        grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, filter)
        host_x, host_w = (jax.device_get(v).astype(np.float64) for v in (x, filter))
        want, vjp = jax.vjp(lambda a, b: _lax_conv(a, b, fmt, s, d, pad, p, depthwise),
                            jnp.asarray(host_x), jnp.asarray(host_w))
        _close(jax.device_get(y), want, dtype)
        want_dx, want_dw = vjp(2 * jax.device_get(y).astype(np.float64))
        _close(jax.device_get(grads[0]), want_dx, dtype)
        _close(jax.device_get(grads[1]), want_dw, dtype)
