"""What a Python call of convjit costs besides the kernel's own work, on an installed package:

  python benchmarks/python_overhead.py [--calls N] [--pip-install]

- call overhead: Kernel.run and the TensorFlow-named function on tiny tensors (a 1x2x2x1 input
  gradient, nanoseconds of arithmetic), median per call over many calls;
- first call in a new process with a warm disk cache: the first conv2d_backprop_input of a
  fresh interpreter whose kernel another process compiled (import excluded);
- `import convjit` in a fresh interpreter;
- with --pip-install: `pip install .` of this checkout into a scratch directory (a full build).

Timings on a shared or busy machine are rough: run it on a quiet one and compare medians.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TINY = dict(input_sizes=(1, 2, 2, 1), filter=(1, 1, 1, 1), strides=(1, 1, 1, 1), padding="VALID")

FIRST_CALL = r"""
import time, json
import numpy as np
t0 = time.perf_counter()
import convjit
t1 = time.perf_counter()
w = np.ones((3, 3, 16, 16), np.float32); dy = np.ones((1, 14, 14, 16), np.float32)
t2 = time.perf_counter()
convjit.conv2d_backprop_input((1, 14, 14, 16), w, dy, (1, 1, 1, 1), "SAME")
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_call_ms": (t3 - t2) * 1e3}))
"""

IMPORT_ONLY = r"""
import time, json
t0 = time.perf_counter()
import convjit
print(json.dumps({"import_ms": (time.perf_counter() - t0) * 1e3}))
"""


def per_call_us(function, calls):
    for _ in range(1000):
        function()
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def run_json(script, env):
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=9, help="fresh processes per start-up figure")
    parser.add_argument("--pip-install", action="store_true", help="also time `pip install .` (minutes)")
    args = parser.parse_args()

    import numpy as np
    import convjit

    print("convjit %s from %s" % (convjit.__version__, os.path.dirname(convjit.__file__)))
    kernel = convjit.compile("conv2d_backprop_input", **TINY)
    w = np.ones((1, 1, 1, 1), np.float32)
    dy = np.ones((1, 2, 2, 1), np.float32)
    out = np.empty((1, 2, 2, 1), np.float32)
    print("call overhead, tiny tensors (median of 7 x %d calls):" % args.calls)
    print("  Kernel.run(w, dy, out=out)          %7.2f us" % per_call_us(lambda: kernel.run(w, dy, out=out), args.calls))
    print("  Kernel.run(w, dy)  (new result)     %7.2f us" % per_call_us(lambda: kernel.run(w, dy), args.calls))
    print("  conv2d_backprop_input(...)          %7.2f us" % per_call_us(
        lambda: convjit.conv2d_backprop_input((1, 2, 2, 1), w, dy, (1, 1, 1, 1), "VALID"), args.calls))
    try:
        import torch

        tw, tdy = torch.ones(1, 1, 1, 1), torch.ones(1, 2, 2, 1)
        print("  Kernel.run(torch, torch)            %7.2f us" % per_call_us(lambda: kernel.run(tw, tdy), args.calls // 4))
    except ImportError:
        pass

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CONVJIT_CACHE_DIR=cache)
        run_json(FIRST_CALL, env)  # compiles and stores the kernel
        firsts = [run_json(FIRST_CALL, env) for _ in range(args.repeats)]
        imports = [run_json(IMPORT_ONLY, env)["import_ms"] for _ in range(args.repeats)]
    print("new process, warm disk cache (median of %d processes):" % args.repeats)
    print("  first call (disk hit, run)          %7.2f ms" % statistics.median(f["first_call_ms"] for f in firsts))
    print("  import convjit                      %7.2f ms" % statistics.median(imports))
    print("  import convjit after numpy          %7.2f ms" % statistics.median(f["import_ms"] for f in firsts))

    if args.pip_install:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with tempfile.TemporaryDirectory() as target:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, repo],
                           check=True)
            print("pip install . (full build)            %7.1f s" % (time.perf_counter() - start))


if __name__ == "__main__":
    main()
