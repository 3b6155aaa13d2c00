"""TensorFlow, JAX and PyTorch loaded in one process with all of convjit's adapters (no symbol
clash between the frameworks, convjit and the adapters' native libraries), and the examples
and the framework benchmark run (tiny sizes)."""

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO, optional_module

FRAMEWORKS = ("tensorflow", "jax", "torch")
missing = [name for name in FRAMEWORKS if optional_module(name) is None]

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")  # with conftest.py's CONVJIT_ADAPTER_DIR

# PyTorch first, with torch._dynamo: PyTorch's custom-op machinery imports dynamo and with it
# triton, whose LLVM aborts the process ("Option ... registered more than once") when
# TensorFlow's LLVM was loaded before it. That clash is between the two frameworks (it happens
# without convjit); in this order all three run.
TOGETHER = r"""
import numpy as np
import torch, torch._dynamo
import tensorflow as tf, jax, jax.numpy as jnp
import convjit, convjit.tf as ctf, convjit.jax as cj, convjit.torch as ct

x = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((3, 3, 3, 4)).astype(np.float32)
want = convjit.conv2d(x, w, (1, 1, 1, 1), "SAME")
got_tf = ctf.conv2d(tf.constant(x), tf.constant(w), [1, 1, 1, 1], "SAME").numpy()
got_jax = np.asarray(jax.jit(lambda a, b: cj.conv2d(a, b, (1, 1, 1, 1), "SAME"))(x, w))
got_torch = ct.conv2d(torch.from_numpy(x), torch.from_numpy(w), [1, 1, 1, 1], "SAME").numpy()
for name, got in (("tf", got_tf), ("jax", got_jax), ("torch", got_torch)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
print("all three frameworks ran convjit")
"""


def _run(args, timeout=600):
    result = subprocess.run([sys.executable] + args, cwd=str(REPO), env=ENV, timeout=timeout,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert result.returncode == 0, result.stdout[-4000:]
    return result.stdout


@pytest.mark.skipif(bool(missing), reason="needs %s" % ", ".join(missing))
def test_tensorflow_jax_and_torch_in_one_process():
    assert "all three frameworks ran convjit" in _run(["-c", TOGETHER])


@pytest.mark.skipif(bool(missing), reason="needs %s" % ", ".join(missing))
@pytest.mark.parametrize("example", ["train_torch.py", "train_jax.py", "train_tf.py"])
def test_examples_losses_match(example):
    out = _run([str(pathlib.Path("examples") / example), "--steps", "3"])
    assert out.count("\n") >= 4, out


@pytest.mark.skipif(bool(missing), reason="needs %s" % ", ".join(missing))
def test_framework_benchmark_runs():
    out = _run(["benchmarks/frameworks.py", "--quick"])
    for title in ("torch", "jax", "tensorflow", "ResNet block step", "conv2d call, tiny"):
        assert title in out, out
