// convjit's parallel loop on PyTorch's intra-op thread pool (at::parallel_for).
//
// convjit.torch passes convjit_torch_parallel_for to each CPU run (convjit_run_with_parallel_for
// through Kernel.run's parallel_for argument), so a kernel's chunks run on the threads PyTorch's
// own operators use, sized by torch.set_num_threads, instead of on a second pool that would
// compete with PyTorch's for the cores.
//
// Built on first use by convjit/_adapters/native.py against the installed torch's headers and
// libraries. PyTorch's CPU wheels parallelise with OpenMP, and at::parallel_for's OpenMP loop is
// inline in the headers: this file is compiled with -fopenmp so that the loop is real, and its
// libgomp.so.1 resolves, when loaded into the process, to the one torch has already loaded —
// one OpenMP thread team, PyTorch's.

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "convjit/convjit.h"

namespace {
// More chunks than threads so uneven chunk costs (border regions) balance out, as in convjit's
// own pool: each of PyTorch's threads takes the next chunk until none is left.
constexpr std::int64_t kChunksPerThread = 4;
}  // namespace

extern "C" __attribute__((visibility("default"))) void convjit_torch_parallel_for(
    void* /*ctx*/, std::int64_t n, void (*body)(void* body_ctx, std::int64_t begin, std::int64_t end),
    void* body_ctx) {
  if (n <= 0) return;
  const std::int64_t threads = at::get_num_threads();
  const std::int64_t chunks = std::min<std::int64_t>(n, kChunksPerThread * threads);
  if (threads <= 1 || chunks <= 1 || at::in_parallel_region()) {
    body(body_ctx, 0, n);
    return;
  }
  std::atomic<std::int64_t> next{0};
  at::parallel_for(0, threads, 1, [&](std::int64_t, std::int64_t) {
    for (;;) {
      const std::int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      // Chunk c covers [c*n/chunks, (c+1)*n/chunks): sizes differ by at most one.
      body(body_ctx, static_cast<std::int64_t>(static_cast<__int128>(c) * n / chunks),
           static_cast<std::int64_t>(static_cast<__int128>(c + 1) * n / chunks));
    }
  });
}
static_assert(std::is_same_v<decltype(&convjit_torch_parallel_for), convjit_parallel_for_fn>,
              "convjit_torch_parallel_for must have the C ABI's parallel loop signature");

// Which parallel backend at::parallel_for has in this build, for convjit.torch's check that
// the loop above really is parallel: at::parallel_for is serial when compiled without the
// backend's support.
extern "C" __attribute__((visibility("default"))) int convjit_torch_intra_op_parallel() {
#ifdef INTRA_OP_PARALLEL
  return 1;
#else
  return 0;
#endif
}
