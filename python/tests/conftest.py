"""Shared set-up: the tests never touch the user's kernel cache, and find the shared test data
beside the checkout (../shared) or at $CONVJIT_SHARED_DIR."""

import os
import pathlib
import tempfile

import pytest

# PyTorch (and torch._dynamo, which its custom ops import, and with it triton) before any test
# module imports TensorFlow: triton's LLVM aborts the process when TensorFlow's was loaded
# first (a clash between the two frameworks; docs/FRAMEWORKS.md).
try:
    import torch
    import torch._dynamo  # noqa: F401
except ImportError:
    pass

_CACHE = tempfile.TemporaryDirectory(prefix="convjit-pytest-cache-")
os.environ["CONVJIT_CACHE_DIR"] = os.path.join(_CACHE.name, "cache")
# The framework adapters' native libraries, built once for the whole run.
os.environ["CONVJIT_ADAPTER_DIR"] = os.path.join(_CACHE.name, "adapters")

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("CONVJIT_SHARED_DIR", REPO.parent / "shared"))


def optional_module(name):
    """The module, or None when it is not installed (its tests then skip, saying why)."""
    try:
        return __import__(name)
    except ImportError:
        return None


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private disk cache directory for one test."""
    directory = tmp_path / "kernels"
    monkeypatch.setenv("CONVJIT_CACHE_DIR", str(directory))
    return directory


def require_convjit_device(device):
    """Skips the test, saying why, unless convjit compiles for `device` ("cuda:N")."""
    import convjit

    try:
        convjit.compile("conv2d_backprop_input", device=device, input_sizes=(1, 5, 5, 2),
                        filter=(3, 3, 2, 4), strides=(1, 1, 1, 1), padding="SAME")
    except convjit.Error as error:
        pytest.skip("convjit cannot compile for %s: %s" % (device, error))
