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
