"""Shared set-up: the tests never touch the user's kernel cache, and find the shared test data
beside the checkout (../shared) or at $CONVJIT_SHARED_DIR."""

import os
import pathlib
import tempfile

import pytest

_CACHE = tempfile.TemporaryDirectory(prefix="convjit-pytest-cache-")
os.environ["CONVJIT_CACHE_DIR"] = os.path.join(_CACHE.name, "cache")

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
