"""Builds a framework adapter's native library on first use, once per source and framework
version, into convjit's adapter cache ($CONVJIT_ADAPTER_DIR, else
$XDG_CACHE_HOME/convjit/adapters or ~/.cache/convjit/adapters).

The library is compiled with the framework's own flags against convjit's C ABI (the package's
include/ and lib/), so it matches the installed framework whatever version that is; a change
of the source, the framework or convjit gives a new directory. Concurrent first uses (several
processes) build under a file lock and publish by rename, so no process loads a half-written
library.
"""

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from .. import _paths
from .._convjit import Error, __version__

_HERE = os.path.dirname(os.path.abspath(__file__))


def cache_root():
    root = os.environ.get("CONVJIT_ADAPTER_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "convjit", "adapters")


def _compiler():
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate.split()[0]):
            return shlex.split(candidate)
    raise Error("convjit needs a C++17 compiler to build its framework adapter (set $CXX)")


def build_library(name, sources, cflags, ldflags, framework_version):
    """The path of lib<name>.so built from `sources` (files of this directory), compiled once
    for this framework version, convjit version and flags."""
    compiler = _compiler()
    digest = hashlib.sha256()
    for part in [__version__, framework_version, sys.version] + compiler + cflags + ldflags:
        digest.update(part.encode() + b"\0")
    for source in sources + ["adapter_common.h"]:
        with open(os.path.join(_HERE, source), "rb") as f:
            digest.update(f.read())
    directory = os.path.join(cache_root(), "%s-%s" % (name, digest.hexdigest()[:16]))
    library = os.path.join(directory, "lib%s.so" % name)
    if os.path.exists(library):
        return library
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(library):  # another process built it meanwhile
            return library
        print("convjit: building the %s adapter for %s (once, into %s) ..." %
              (name, framework_version, directory), file=sys.stderr, flush=True)
        fd, partial = tempfile.mkstemp(prefix=".lib%s-" % name, suffix=".so", dir=directory)
        os.close(fd)
        command = (compiler + ["-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
                               "-I", _HERE, "-I", _paths.get_include()] + cflags +
                   [os.path.join(_HERE, s) for s in sources] +
                   ["-o", partial, "-L", _paths.get_library_dir(), "-lconvjit",
                    "-Wl,-rpath," + _paths.get_library_dir()] + ldflags)
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        if result.returncode != 0:
            os.unlink(partial)
            raise Error("building convjit's %s adapter failed:\n%s\n%s" %
                        (name, " ".join(shlex.quote(c) for c in command), result.stdout[-4000:]))
        os.replace(partial, library)
        print("convjit: built %s" % library, file=sys.stderr, flush=True)
    return library
