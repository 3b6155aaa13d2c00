"""Many Python threads at once: the GIL is released while kernels compile and run, and every
thread gets exactly the single-threaded result."""

import threading

import numpy as np

import convjit


def test_sixteen_threads_at_once():
    rng = np.random.default_rng(3)
    cases = []
    for i in range(4):  # four op instances, shared by the threads
        sizes = (2, 7 + i, 9, 3)
        w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
        dy = rng.standard_normal((2, 7 + i, 9, 4)).astype(np.float32)
        cases.append((sizes, w, dy, convjit.conv2d_backprop_input(sizes, w, dy, (1, 1, 1, 1), "SAME")))
    kernel = convjit.compile("conv2d_backprop_filter", input=(2, 8, 8, 3), filter_sizes=(3, 3, 3, 4),
                             strides=(1, 1, 1, 1), padding="VALID")
    x = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    dy6 = rng.standard_normal((2, 6, 6, 4)).astype(np.float32)
    dw = kernel.run(x, dy6)
    barrier = threading.Barrier(16)
    failures = []

    def worker(index):
        try:
            barrier.wait()
            for step in range(25):
                sizes, w, dy, want = cases[(index + step) % len(cases)]
                got = convjit.conv2d_backprop_input(sizes, w, dy, (1, 1, 1, 1), "SAME")
                if not np.array_equal(got, want):
                    failures.append((index, step, "function"))
                out = np.empty_like(dw)
                kernel.run(x, dy6, out=out)
                if not np.array_equal(out, dw):
                    failures.append((index, step, "kernel"))
                # A fresh compile from each thread too (a new instance per thread and step).
                convjit.compile("conv2d", input=(1, 5 + index, 5 + step % 3, 2), filter=(2, 2, 2, 2),
                                strides=(1, 1, 1, 1), padding="SAME")
        except Exception as error:  # reported below with the thread that raised it
            failures.append((index, repr(error)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_gil_is_released_while_a_kernel_runs():
    # While one thread runs a long kernel, another thread's Python code keeps running.
    kernel = convjit.compile("conv2d_backprop_input", input_sizes=(8, 56, 56, 64), filter=(3, 3, 64, 64),
                             strides=(1, 1, 1, 1), padding="SAME", num_threads=1)
    w = np.ones((3, 3, 64, 64), np.float32)
    dy = np.ones((8, 56, 56, 64), np.float32)
    done = threading.Event()
    ticks = []

    def count():
        while not done.is_set():
            ticks.append(1)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        for _ in range(3):
            kernel.run(w, dy)
    finally:
        done.set()
        counter.join()
    assert len(ticks) > 0
