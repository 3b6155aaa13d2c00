// Runs the blocks of one interpreted kernel launch on the calling OS thread: every CUDA thread
// of a block is a fiber; __syncthreads() and warp-level operations switch between them. The
// checks (bounds, races, uninitialised shared reads, barrier divergence, warp-op divergence,
// cp.async copies never waited for) report through an ErrorSink: the first report of a launch
// becomes its error, naming kernel, block, thread and line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/interpret/cuda_interpret_abi.h"

namespace convjit::runtime::interpret {

/// One of a launch's global buffers (the op's tensors and the workspace).
struct GlobalBuffer {
  const std::byte* base = nullptr;
  std::size_t bytes = 0;
  const char* name = "";
  bool writable = false;
};

/// The kernel arguments (the layout of cj_args in both preludes).
struct KernelArgs {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
};
using KernelEntry = void (*)(KernelArgs);

/// What every block of one launch shares (read-only while it runs).
struct LaunchInfo {
  std::string kernel;  // the symbol
  int launch_index = 0, launch_count = 1;
  KernelEntry entry = nullptr;
  KernelArgs args;
  cj_dim3 grid{1, 1, 1}, block{1, 1, 1};
  std::vector<GlobalBuffer> buffers;
};

/// The first error of a launch (several OS threads may run its blocks).
class ErrorSink {
 public:
  void report(std::string message);
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  /// The first message, with the number of further reports.
  std::string summary() const;

 private:
  mutable std::mutex mutex_;
  std::string first_;
  int count_ = 0;
  std::atomic<bool> failed_{false};
};

/// The interpreter's side of cj_interpret_api (the same table for every kernel).
const cj_interpret_api* interpret_api();

class BlockRunner {
 public:
  BlockRunner();
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  /// Runs block `linear_block` (x fastest) of `launch`; reports go to `errors`.
  void run_block(const LaunchInfo& launch, std::int64_t linear_block, ErrorSink* errors);

  /// The calling OS thread's runner (created on first use).
  static BlockRunner& for_this_thread();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace convjit::runtime::interpret
