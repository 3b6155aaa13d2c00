"""The installed package is self-contained: its extension, library and command line need only
the C and C++ runtimes (and each other), so a wheel built here runs on a machine of the same
platform without convjit's build dependencies."""

import glob
import os
import shutil
import subprocess

import pytest

import convjit

PACKAGE = os.path.dirname(os.path.abspath(convjit.__file__))
RUNTIME = ("linux-vdso.so", "ld-linux-x86-64.so", "libc.so", "libm.so", "libdl.so", "libpthread.so",
           "librt.so", "libgcc_s.so", "libstdc++.so", "libconvjit.so")


def needed(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()], out


@pytest.mark.skipif(shutil.which("ldd") is None, reason="ldd is not installed")
@pytest.mark.parametrize("relative", ["_convjit*.so", "lib/libconvjit.so.*.*.*", "bin/convjit"])
def test_needs_only_the_c_and_cxx_runtimes(relative):
    matches = glob.glob(os.path.join(PACKAGE, relative))
    assert matches, "%s is missing from the package" % relative
    libraries, listing = needed(matches[0])
    assert "not found" not in listing, listing
    extra = [lib for lib in libraries if not os.path.basename(lib).startswith(RUNTIME)]
    assert extra == [], listing


def test_extension_finds_the_bundled_library():
    extension = glob.glob(os.path.join(PACKAGE, "_convjit*.so"))[0]
    _, listing = needed(extension)
    bundled = os.path.realpath(os.path.join(PACKAGE, "lib"))
    line = next(line for line in listing.splitlines() if "libconvjit.so" in line)
    assert os.path.realpath(line.split("=>")[1].split()[0]).startswith(bundled), listing


def test_versions_agree():
    from convjit import _convjit

    assert convjit.__version__ == _convjit.HEADER_VERSION
    assert convjit.__version__.count(".") == 2
