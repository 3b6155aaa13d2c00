// The state of one interpreted block, shared by the scheduler (block_runner.cpp) and the
// functions kernels call through cj_interpret_api (interpret_api.cpp). Private to the
// interpret mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cuda/interpret/block_runner.hpp"
#include "runtime/cuda/interpret/fiber.hpp"
#include "runtime/cuda/interpret/shared_memory.hpp"
#include "runtime/cuda/interpret/warp_ops.hpp"

namespace convjit::runtime::interpret {

enum class ThreadState { kRunnable, kAtBarrier, kInWarpOp, kDone };
enum class WarpOpKind { kNone, kShuffle, kLdmatrix, kMma };

struct AsyncCopy {
  std::byte* shared;
  const std::byte* global;
  int bytes, src_bytes, line;
};

struct ThreadContext {
  Fiber fiber;
  cj_dim3 index{0, 0, 0};
  int linear = 0;
  ThreadState state = ThreadState::kRunnable;
  int wait_line = 0;
  std::size_t next_shared = 0;
  std::vector<AsyncCopy> open_group;
  std::deque<std::vector<AsyncCopy>> committed;
  std::string name;  // "(x,y,z)", made when a message needs it
};

struct WarpOp {
  WarpOpKind kind = WarpOpKind::kNone;
  int variant = 0;
  int line = 0;
  int arrived = 0;
  const void* p0[kWarpSize] = {};
  const void* p1[kWarpSize] = {};
  void* out[kWarpSize] = {};
  std::uint32_t value[kWarpSize] = {};
  int operand[kWarpSize] = {};
};

struct BlockRunner::Impl {
  std::vector<std::unique_ptr<FiberStack>> stacks;
  std::vector<std::unique_ptr<ThreadContext>> threads;
  int thread_count = 0;
  SharedMemory shared;
  std::vector<WarpOp> warps;
  const LaunchInfo* launch = nullptr;
  ErrorSink* errors = nullptr;
  cj_dim3 block_index{0, 0, 0};
  ThreadContext* current = nullptr;
  bool aborting = false;

  const std::string& thread_name(int linear) {
    ThreadContext& t = *threads[static_cast<std::size_t>(linear)];
    if (t.name.empty()) t.name = fmt::format("({},{},{})", t.index.x, t.index.y, t.index.z);
    return t.name;
  }

  void report(int thread, std::string_view what, int line) {
    errors->report(fmt::format(
        "cuda-interpret: kernel {} (launch {} of {}), block ({},{},{}), thread {}: {} (line {} "
        "of the kernel body)",
        launch->kernel, launch->launch_index + 1, launch->launch_count, block_index.x,
        block_index.y, block_index.z, thread_name(thread), what, line));
  }
  void report(std::string_view what, int line) { report(current->linear, what, line); }

  /// Stops the block for good: this fiber is never resumed, nor is any other.
  [[noreturn]] void abort_block() {
    aborting = true;
    current->fiber.yield();
    __builtin_unreachable();
  }

  bool check_global(const void* base, const void* address, std::size_t bytes, bool is_write,
                    int line);
  bool check_shared(int thread, const void* base, const void* address, std::size_t bytes,
                    bool is_write, int line);
  struct LaneOperands {
    const void* p0 = nullptr;
    const void* p1 = nullptr;
    void* out = nullptr;
    std::uint32_t value = 0;
    int operand = 0;
  };
  /// This lane's arrival at a warp-level operation: returns once all lanes of the warp have
  /// arrived and the operation is done (the last to arrive computes it for all).
  void arrive(WarpOpKind kind, int variant, int line, const LaneOperands& mine);
  void complete(WarpOp& op, int warp, int lanes);
  void finish_thread(ThreadContext& t);
  std::string describe_deadlock(const ThreadContext& waiting);
  void perform_copies(std::vector<AsyncCopy>& group);
};

/// The block the calling OS thread is running (set for the duration of run_block).
extern thread_local BlockRunner::Impl* t_impl;

}  // namespace convjit::runtime::interpret
