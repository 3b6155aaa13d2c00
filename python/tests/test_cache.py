"""convjit.cache mirrors `convjit cache list|stats|purge`; the console script runs the CLI."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import convjit


def compile_unique(width=13):
    # A shape no other test uses, so this test's entry is the one it looks for (a kernel this
    # process compiled before is a memory-cache hit and is not stored again).
    return convjit.compile("conv2d_backprop_filter", input=(1, 11, width, 3), filter_sizes=(3, 3, 3, 7),
                           strides=(1, 1, 1, 1), padding="VALID", dtype="float64")


def test_list_stats_and_purge():
    compile_unique()
    entries = [e for e in convjit.cache.list() if e.get("op") == "Conv2DBackpropFilter"
               and e.get("dtype") == "float64"]
    assert entries, convjit.cache.list()
    entry = entries[0]
    assert len(entry["key_hash"]) == 32 and entry["bytes"] > 0 and entry["backend"]
    stats = convjit.cache.stats()
    assert stats["enabled"] is True and stats["directory"] == os.environ["CONVJIT_CACHE_DIR"]
    assert stats["entries"] >= 1 and stats["by_op"]["Conv2DBackpropFilter float64"]["entries"] >= 1
    removed = convjit.cache.purge(op="conv2d_backprop_filter", dtype="float64")
    assert removed["removed_entries"] >= 1
    assert not [e for e in convjit.cache.list() if e.get("op") == "Conv2DBackpropFilter"
                and e.get("dtype") == "float64"]
    assert convjit.cache.purge(older_than="30d")["removed_entries"] == 0
    convjit.cache.purge(max_bytes=1 << 40)


@pytest.mark.parametrize("kwargs,message", [
    (dict(), "purge needs"),
    (dict(older_than="soon"), "not a duration"),
    (dict(older_than=-5), "positive"),
    (dict(max_bytes=-1), "max_bytes"),
])
def test_bad_purge_requests(kwargs, message):
    with pytest.raises(convjit.Error, match=message):
        convjit.cache.purge(**kwargs)


def test_disabled_cache(monkeypatch):
    monkeypatch.setenv("CONVJIT_CACHE_DIR", "off")
    assert convjit.cache.list() == []
    assert convjit.cache.stats()["enabled"] is False


def cli():
    script = shutil.which("convjit", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "convjit"]


def test_console_script_runs_the_command_line():
    version = subprocess.run(cli() + ["--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "convjit " + convjit.__version__
    compile_unique(width=15)
    listing = subprocess.run(cli() + ["cache", "list"], capture_output=True, text=True, check=True)
    assert "Conv2DBackpropFilter" in listing.stdout
    run = subprocess.run(cli() + ["run", "--op", "conv2d_backprop_input", "--input-sizes", "1,6,6,2",
                                  "--filter-sizes", "3,3,2,2", "--strides", "1,1,1,1", "--padding", "SAME",
                                  "--repeats", "1", "--check"], capture_output=True, text=True)
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
    bench = subprocess.run(cli() + ["bench", "--help"], capture_output=True, text=True)
    assert bench.returncode == 0 or "not installed" in bench.stderr


def test_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "convjit", "--version"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.startswith("convjit ")
