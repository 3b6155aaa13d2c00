"""convjit.torch: the custom ops against PyTorch's own convolutions, autograd, Conv2d and
torch.compile. Small random shapes and attributes so the whole file runs in seconds."""

import random
import subprocess
import sys
import zlib

import pytest

from conftest import optional_module, require_convjit_device

torch = optional_module("torch")
pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

if torch is not None:
    import torch.nn.functional as F
    import convjit.torch as ct

DTYPES = ["float32", "float64", "bfloat16", "float16"]
TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "bfloat16": 3e-2, "float16": 3e-3}


def _case(rng, depthwise):
    """Random shapes and attributes: (N, H, W, C), (kh, kw, C, M or O), strides, dilations and
    padding in (h, w) order."""
    n, h, w = rng.randint(1, 3), rng.randint(4, 9), rng.randint(4, 9)
    c = rng.randint(1, 5)
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    o = rng.randint(1, 3) if depthwise else rng.randint(1, 6)
    sh, sw = rng.randint(1, 2), rng.randint(1, 2)
    if depthwise:
        sw = sh  # TensorFlow's depthwise ops take equal row and column strides
    dh, dw = (1, 1) if (sh, sw) != (1, 1) else (rng.randint(1, 2), rng.randint(1, 2))
    pad = rng.choice(["VALID", "EXPLICIT"])
    ph, pw = (rng.randint(0, 2), rng.randint(0, 2)) if pad == "EXPLICIT" else (0, 0)
    # At least one output row and column: PyTorch refuses a window larger than the input.
    h = max(h, (kh - 1) * dh + 1 - 2 * ph)
    w = max(w, (kw - 1) * dw + 1 - 2 * pw)
    return (n, h, w, c), (kh, kw, c, o), (sh, sw), (dh, dw), pad, (ph, pw)


def _attrs(fmt, s, d, pad, p):
    if fmt == "NHWC":
        strides, dilations = [1, s[0], s[1], 1], [1, d[0], d[1], 1]
        explicit = [0, 0, p[0], p[0], p[1], p[1], 0, 0] if pad == "EXPLICIT" else []
    else:
        strides, dilations = [1, 1, s[0], s[1]], [1, 1, d[0], d[1]]
        explicit = [0, 0, 0, 0, p[0], p[0], p[1], p[1]] if pad == "EXPLICIT" else []
    return dict(strides=strides, padding=pad, explicit_paddings=explicit, data_format=fmt,
                dilations=dilations)


def _to_fmt(x_nchw, fmt):
    return x_nchw.contiguous() if fmt == "NCHW" else x_nchw.permute(0, 2, 3, 1).contiguous()


def _to_nchw(x, fmt):
    return x if fmt == "NCHW" else x.permute(0, 3, 1, 2)


def _torch_weight(filter, depthwise):
    """HWIO (or [h, w, in, multiplier]) as PyTorch's OIHW."""
    if depthwise:
        kh, kw, c, m = filter.shape
        return filter.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
    return filter.permute(3, 2, 0, 1)


def _close(got, want, dtype):
    tol = TOLERANCE[dtype]
    got, want = got.detach(), want.detach()
    scale = max(1.0, float(want.double().abs().max()))
    assert got.shape == want.shape
    err = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    assert err <= tol * scale, "max error %g > %g" % (err, tol * scale)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_match_torch(depthwise, fmt, dtype):
    rng = random.Random(zlib.crc32(("%s-%s-%s" % (depthwise, fmt, dtype)).encode()))
    torch_dtype = getattr(torch, dtype)
    for _ in range(3):
        (n, h, w, c), fshape, s, d, pad, p = _case(rng, depthwise)
        attrs = _attrs(fmt, s, d, pad, p)
        x_nchw = torch.randn(n, c, h, w, dtype=torch.float64).to(torch_dtype)
        filter = torch.randn(*fshape, dtype=torch.float64).to(torch_dtype)
        weight = _torch_weight(filter, depthwise)
        groups = c if depthwise else 1
        ref_args = dict(stride=s, padding=p, dilation=d, groups=groups)
        # PyTorch's reference in float64, rounded to the dtype as convjit's result is.
        want = F.conv2d(x_nchw.double(), weight.double(), **ref_args)
        x = _to_fmt(x_nchw, fmt)
        forward = ct.depthwise_conv2d_native if depthwise else ct.conv2d
        y = forward(x, filter, **attrs)
        assert y.dtype == torch_dtype
        _close(_to_nchw(y, fmt), want, dtype)

        dy_nchw = torch.randn(*want.shape, dtype=torch.float64).to(torch_dtype)
        dy = _to_fmt(dy_nchw, fmt)
        want_dx = torch.nn.grad.conv2d_input(x_nchw.shape, weight.double(), dy_nchw.double(),
                                             **ref_args)
        want_dw = torch.nn.grad.conv2d_weight(x_nchw.double(), weight.shape, dy_nchw.double(),
                                              **ref_args)
        if depthwise:
            dx = ct.depthwise_conv2d_native_backprop_input(x.shape, filter, dy, **attrs)
            dw = ct.depthwise_conv2d_native_backprop_filter(x, filter.shape, dy, **attrs)
        else:
            dx = ct.conv2d_backprop_input(x.shape, filter, dy, **attrs)
            dw = ct.conv2d_backprop_filter(x, filter.shape, dy, **attrs)
        _close(_to_nchw(dx, fmt), want_dx, dtype)
        _close(_torch_weight(dw, depthwise), want_dw, dtype)


def test_same_padding_matches_torch():
    x = torch.randn(2, 7, 6, 3, dtype=torch.float64)
    filter = torch.randn(4, 3, 3, 5, dtype=torch.float64)  # even height: the extra row goes after
    y = ct.conv2d(x, filter, [1, 1, 1, 1], "SAME")
    want = F.conv2d(x.permute(0, 3, 1, 2), filter.permute(3, 2, 0, 1), padding="same")
    _close(y.permute(0, 3, 1, 2), want, "float64")


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_gradcheck(depthwise, fmt):
    x = torch.randn(2, 5, 6, 3, dtype=torch.float64)
    x = x if fmt == "NHWC" else x.permute(0, 3, 1, 2).contiguous()
    filter = torch.randn(3, 2, 3, 2, dtype=torch.float64)
    x.requires_grad_()
    filter.requires_grad_()
    attrs = _attrs(fmt, (2, 2), (1, 1), "EXPLICIT", (1, 0))
    forward = ct.depthwise_conv2d_native if depthwise else ct.conv2d
    assert torch.autograd.gradcheck(lambda a, b: forward(a, b, **attrs), (x, filter))


def test_backward_runs_convjit_gradient_ops(monkeypatch):
    calls = []
    original = ct._run

    def spy(op, *args):
        calls.append(op)
        return original(op, *args)

    monkeypatch.setattr(ct, "_run", spy)
    x = torch.randn(1, 5, 5, 2, requires_grad=True)
    filter = torch.randn(3, 3, 2, 4, requires_grad=True)
    ct.conv2d(x, filter, [1, 1, 1, 1], "SAME").sum().backward()
    assert calls == ["conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"]
    calls.clear()
    x.grad = None
    filter.requires_grad_(False)
    ct.conv2d(x, filter, [1, 1, 1, 1], "SAME").sum().backward()
    assert calls == ["conv2d", "conv2d_backprop_input"]


@pytest.mark.parametrize("kwargs", [
    dict(in_channels=3, out_channels=5, kernel_size=3),
    dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=2, padding=(1, 0), bias=False),
    dict(in_channels=4, out_channels=4, kernel_size=3, padding="same", dilation=2),
    dict(in_channels=4, out_channels=8, kernel_size=3, padding=1, groups=4),
    dict(in_channels=4, out_channels=6, kernel_size=1, groups=2, padding="valid"),
    dict(in_channels=3, out_channels=2, kernel_size=3, padding=1, padding_mode="reflect"),
])
def test_conv2d_module_is_a_drop_in(kwargs):
    torch.manual_seed(0)
    ours = ct.Conv2d(**kwargs, dtype=torch.float64)
    theirs = torch.nn.Conv2d(**kwargs, dtype=torch.float64)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, kwargs["in_channels"], 9, 8, dtype=torch.float64)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = ours(x1), theirs(x2)
    _close(y1, y2, "float64")
    g = torch.randn_like(y2)
    y1.backward(g)
    y2.backward(g)
    _close(x1.grad, x2.grad, "float64")
    # The input's gradient in the input's memory format, as PyTorch's own: a channels-last
    # strided gradient of an NCHW tensor slows every elementwise op after it.
    assert x1.grad.is_contiguous()
    _close(ours.weight.grad, theirs.weight.grad, "float64")
    if ours.bias is not None:
        _close(ours.bias.grad, theirs.bias.grad, "float64")


def test_conv2d_module_channels_last():
    torch.manual_seed(1)
    ours = ct.Conv2d(3, 4, 3, padding=1, data_format="NHWC")
    theirs = torch.nn.Conv2d(3, 4, 3, padding=1)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 6, 6, 3)
    _close(ours(x).permute(0, 3, 1, 2), theirs(x.permute(0, 3, 1, 2)), "float32")
    with pytest.raises(ValueError, match="data_format"):
        ct.Conv2d(3, 4, 3, data_format="NCWH")


def test_conv2d_module_keeps_the_memory_format_and_takes_unbatched_input():
    torch.manual_seed(2)
    ours = ct.Conv2d(3, 4, 3, padding=1)
    theirs = torch.nn.Conv2d(3, 4, 3, padding=1)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 3, 7, 6)
    y = ours(x)
    assert y.is_contiguous()
    _close(y, theirs(x), "float32")
    x_cl = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    y_cl = ours(x_cl)
    assert y_cl.is_contiguous(memory_format=torch.channels_last)
    _close(y_cl, theirs(x), "float32")
    y_cl.sum().backward()
    assert x_cl.grad.is_contiguous(memory_format=torch.channels_last)
    reflect = ct.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
    reflect_theirs = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
    reflect_theirs.load_state_dict(reflect.state_dict())
    y_reflect = reflect(x_cl)
    assert y_reflect.is_contiguous(memory_format=torch.channels_last)
    _close(y_reflect, reflect_theirs(x), "float32")
    # Depthwise runs NHWC between copies whatever the input's memory: still NCHW out and back.
    depthwise = ct.Conv2d(3, 6, 3, padding=1, groups=3)
    x_nchw = x.clone().requires_grad_()
    y = depthwise(x_nchw)
    assert y.is_contiguous()
    y.sum().backward()
    assert x_nchw.grad.is_contiguous()
    _close(ours(x[0]), theirs(x[0]), "float32")
    with pytest.raises(RuntimeError, match="3-D .* or 4-D input"):
        ours(torch.randn(3, 7))


def test_errors_are_runtime_errors_with_convjit_message():
    x = torch.randn(1, 5, 5, 2)
    with pytest.raises(RuntimeError, match="strides in the batch and depth dimensions"):
        ct.conv2d(x, torch.randn(3, 3, 2, 4), [2, 1, 1, 1], "SAME")
    with pytest.raises(RuntimeError, match="must match|depth"):
        ct.conv2d(x, torch.randn(3, 3, 3, 4), [1, 1, 1, 1], "SAME")
    with pytest.raises(RuntimeError, match="dtypes"):
        ct.conv2d(x, torch.randn(3, 3, 2, 4, dtype=torch.float64), [1, 1, 1, 1], "SAME")
    with pytest.raises(RuntimeError):
        ct.conv2d(x.to(torch.int32), torch.randn(3, 3, 2, 4).to(torch.int32), [1, 1, 1, 1], "SAME")
    with pytest.raises(RuntimeError, match="padding"):
        ct.conv2d(x, torch.randn(3, 3, 2, 4), [1, 1, 1, 1], "FULL")


def test_non_contiguous_inputs():
    x = torch.randn(2, 3, 6, 6).permute(0, 2, 3, 1)  # NHWC view of an NCHW tensor
    filter = torch.randn(3, 3, 3, 2)
    y = ct.conv2d(x, filter, [1, 1, 1, 1], "VALID")
    want = F.conv2d(x.permute(0, 3, 1, 2), filter.permute(3, 2, 0, 1)).permute(0, 2, 3, 1)
    _close(y, want, "float32")


def test_follows_torch_thread_count():
    before = torch.get_num_threads()
    try:
        x = torch.randn(2, 8, 8, 4)
        filter = torch.randn(3, 3, 4, 4)
        want = ct.conv2d(x, filter, [1, 1, 1, 1], "SAME")
        torch.set_num_threads(1)
        got = ct.conv2d(x, filter, [1, 1, 1, 1], "SAME")
        assert any(key[3] == 1 for key in ct._kernels)
        _close(got, want, "float32")
    finally:
        torch.set_num_threads(before)


# In a process of its own, so that no earlier test has started convjit's pool: convjit.torch's
# kernels run on PyTorch's threads (no "convjit-pool" thread appears), while the same kernel run
# through the plain package starts convjit's pool — the control that shows the check can fail.
POOL_SCRIPT = r"""
import os, threading, warnings
import numpy as np
import torch
warnings.simplefilter("error")  # a fallback to convjit's pool warns: fail on it
torch.set_num_threads(2)
import convjit, convjit.torch as ct

def convjit_threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/comm" % tid) as f:
            names.append(f.read().strip())
    return names.count("convjit-pool")

x = torch.randn(4, 32, 32, 32)
w = torch.randn(3, 3, 32, 32)
y = ct.conv2d(x, w, [1, 1, 1, 1], "SAME")
dx = ct.conv2d_backprop_input(list(x.shape), w, y, [1, 1, 1, 1], "SAME")
want = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding=1)
assert torch.allclose(y.permute(0, 3, 1, 2), want, rtol=1e-4, atol=1e-3)
print("torch-run convjit-pool threads:", convjit_threads())
kernel = convjit.compile("conv2d", num_threads=2, input=tuple(x.shape), filter=tuple(w.shape),
                         strides=(1, 1, 1, 1), padding="SAME")
kernel.run(x.numpy(), w.numpy())
print("package-run convjit-pool threads:", convjit_threads())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_cpu_kernels_run_on_torch_thread_pool():
    result = subprocess.run([sys.executable, "-c", POOL_SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "torch-run convjit-pool threads: 0" in result.stdout, result.stdout
    assert "package-run convjit-pool threads: 1" in result.stdout, result.stdout


def test_fake_kernels_give_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(2, 9, 7, 4)
        filter = torch.empty(3, 2, 4, 6)
        y = torch.ops.convjit.conv2d(x, filter, [1, 2, 3, 1], "VALID", [], "NHWC", [1, 1, 1, 1])
        assert tuple(y.shape) == (2, 4, 2, 6)
        yd = torch.ops.convjit.depthwise_conv2d_native(x, torch.empty(3, 3, 4, 2), [1, 1, 1, 1],
                                                       "SAME", [], "NHWC", [1, 1, 1, 1])
        assert tuple(yd.shape) == (2, 9, 7, 8)
        dx = torch.ops.convjit.conv2d_backprop_input([2, 9, 7, 4], filter, y, [1, 2, 3, 1],
                                                     "VALID", [], "NHWC", [1, 1, 1, 1])
        assert tuple(dx.shape) == (2, 9, 7, 4)
    torch.library.opcheck(torch.ops.convjit.conv2d.default,
                          (torch.randn(1, 5, 5, 2), torch.randn(3, 3, 2, 3), [1, 1, 1, 1], "SAME",
                           [], "NHWC", [1, 1, 1, 1]))


def test_torch_compile_of_a_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(ct.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                ct.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 2))
    x = torch.randn(2, 3, 6, 6)
    eager = model(x)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    out = compiled(x)
    _close(out, eager, "float32")
    out.sum().backward()
    assert model[0].weight.grad is not None and model[2].weight.grad is not None


def _cuda_or_skip():
    """The current CUDA device, where PyTorch has one and convjit can compile for it; else the
    test skips, saying why."""
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device here")
    device = "cuda:%d" % torch.cuda.current_device()
    require_convjit_device(device)
    return device


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_tensors_match_torch(depthwise, dtype):
    # CUDA tensors: kernels compiled for their device and run on PyTorch's current stream (a
    # side stream here, so an op queued on the default stream instead would race), autograd
    # through the gradient ops, Conv2d on the device.
    device = _cuda_or_skip()
    rng = random.Random(zlib.crc32(("cuda-%s-%s" % (depthwise, dtype)).encode()))
    torch_dtype = getattr(torch, dtype)
    stream = torch.cuda.Stream()
    for fmt in ("NHWC", "NCHW"):
        (n, h, w, c), fshape, s, d, pad, p = _case(rng, depthwise)
        attrs = _attrs(fmt, s, d, pad, p)
        x_nchw = torch.randn(n, c, h, w, dtype=torch.float64)
        filter64 = torch.randn(*fshape, dtype=torch.float64)
        weight = _torch_weight(filter64, depthwise)
        ref_args = dict(stride=s, padding=p, dilation=d, groups=c if depthwise else 1)
        x = _to_fmt(x_nchw, fmt).to(device, torch_dtype).requires_grad_()
        filter = filter64.to(device, torch_dtype).requires_grad_()
        forward = ct.depthwise_conv2d_native if depthwise else ct.conv2d
        with torch.cuda.stream(stream):
            y = forward(x, filter, **attrs)
            (y.float() ** 2).sum().backward()
        stream.synchronize()
        assert y.device == x.device and y.dtype == torch_dtype
        x_ref = x_nchw.to(torch_dtype).double().requires_grad_()
        w_ref = weight.to(torch_dtype).double().requires_grad_()
        want = F.conv2d(x_ref, w_ref, **ref_args)
        (want ** 2).sum().backward()
        _close(_to_nchw(y, fmt).cpu(), want, dtype)
        _close(_to_nchw(x.grad, fmt).cpu(), x_ref.grad, dtype)
        _close(_torch_weight(filter.grad, depthwise).cpu(), w_ref.grad, dtype)
    module = ct.Conv2d(3, 4, 3, padding=1).to(device)
    reference = torch.nn.Conv2d(3, 4, 3, padding=1).to(device)
    reference.load_state_dict(module.state_dict())
    x = torch.randn(2, 3, 8, 8, device=device)
    with torch.backends.cudnn.flags(allow_tf32=False):  # the exact float32 reference
        _close(module(x).cpu(), reference(x).cpu(), "float32")
