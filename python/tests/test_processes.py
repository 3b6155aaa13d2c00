"""convjit inside a process that also runs TensorFlow or PyTorch (their own oneDNN, fmt,
Xbyak, ...): both compute, in either import order, with no symbol clash."""

import subprocess
import sys

import pytest

from conftest import optional_module

SCRIPT = """
import numpy as np
{first}
{second}
rng = np.random.default_rng(0)
w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
dy = rng.standard_normal((2, 14, 14, 16)).astype(np.float32)
mine = convjit.conv2d_backprop_input((2, 14, 14, 8), w, dy, (1, 1, 1, 1), "SAME")
theirs = {framework_call}
assert np.allclose(mine, theirs, rtol=1e-4, atol=1e-4), float(np.abs(mine - theirs).max())
print("ok")
"""

CALLS = {
    "tensorflow": ("import tensorflow as tf",
                   "tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 14, 14, 8], filter=w, out_backprop=dy, "
                   "strides=[1, 1, 1, 1], padding='SAME').numpy()"),
    "torch": ("import torch",
              "torch.nn.grad.conv2d_input((2, 8, 14, 14), torch.from_numpy(w).permute(3, 2, 0, 1), "
              "torch.from_numpy(dy).permute(0, 3, 1, 2), padding=1).permute(0, 2, 3, 1).numpy()"),
}


@pytest.mark.parametrize("framework", sorted(CALLS))
@pytest.mark.parametrize("convjit_first", [True, False])
def test_one_process_runs_both(framework, convjit_first):
    if optional_module(framework) is None:
        pytest.skip("%s is not installed" % framework)
    imported, call = CALLS[framework]
    first, second = ("import convjit", imported) if convjit_first else (imported, "import convjit")
    script = SCRIPT.format(first=first, second=second, framework_call=call)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr[-3000:]
