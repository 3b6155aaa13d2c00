#include "runtime/cuda/interpret/block_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/cuda/interpret/block_state.hpp"

namespace convjit::runtime::interpret {

thread_local BlockRunner::Impl* t_impl = nullptr;

namespace {

// Kernel frames are small; the interpreter's own calls (checks, messages) run on these stacks
// too, and sanitizer builds grow frames. Only touched pages cost memory.
constexpr std::size_t kStackBytes = 256 * 1024;

void thread_main(void* arg) {
  auto* t = static_cast<ThreadContext*>(arg);
  BlockRunner::Impl& r = *t_impl;
  const KernelArgs args = r.launch->args;
  r.launch->entry(args);
  r.finish_thread(*t);
}

}  // namespace

void ErrorSink::report(std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (count_++ == 0) first_ = std::move(message);
  failed_.store(true, std::memory_order_relaxed);
}

std::string ErrorSink::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (count_ <= 1) return first_;
  return fmt::format("{} (and {} more report{})", first_, count_ - 1, count_ == 2 ? "" : "s");
}

void BlockRunner::Impl::arrive(WarpOpKind kind, int variant, int line, const LaneOperands& mine) {
  ThreadContext* t = current;
  const int warp = t->linear / kWarpSize;
  const int lane = t->linear % kWarpSize;
  const int lanes = std::min(kWarpSize, thread_count - warp * kWarpSize);
  if (lanes != kWarpSize) {
    report(fmt::format("warp-level operation in a warp of {} threads (the block's {} threads "
                       "are not a multiple of 32)",
                       lanes, thread_count),
           line);
    abort_block();
  }
  for (int l = 0; l < lanes; ++l) {
    if (threads[static_cast<std::size_t>(warp * kWarpSize + l)]->state == ThreadState::kDone) {
      report(fmt::format("warp-level operation while lane {} of the warp has exited", l), line);
      abort_block();
    }
  }
  WarpOp& op = warps[static_cast<std::size_t>(warp)];
  if (op.arrived == 0) {
    op.kind = kind;
    op.variant = variant;
    op.line = line;
  } else if (op.kind != kind || op.variant != variant) {
    report(fmt::format("divergent warp-level operations: this lane is at line {} while other "
                       "lanes of its warp wait at line {}",
                       line, op.line),
           line);
    abort_block();
  }
  op.p0[lane] = mine.p0;
  op.p1[lane] = mine.p1;
  op.out[lane] = mine.out;
  op.value[lane] = mine.value;
  op.operand[lane] = mine.operand;
  if (++op.arrived == lanes) {
    complete(op, warp, lanes);
    op.arrived = 0;
    op.kind = WarpOpKind::kNone;
    for (int l = 0; l < lanes; ++l) {
      ThreadContext& other = *threads[static_cast<std::size_t>(warp * kWarpSize + l)];
      if (other.state == ThreadState::kInWarpOp) other.state = ThreadState::kRunnable;
    }
    return;
  }
  t->state = ThreadState::kInWarpOp;
  t->wait_line = line;
  t->fiber.yield();
}

void BlockRunner::Impl::complete(WarpOp& op, int warp, int lanes) {
  (void)lanes;
  const int first = warp * kWarpSize;
  switch (op.kind) {
    case WarpOpKind::kShuffle: {
      std::uint32_t out[kWarpSize];
      shuffle(static_cast<ShuffleMode>(op.variant), op.value, op.operand, out);
      for (int l = 0; l < kWarpSize; ++l) *static_cast<std::uint32_t*>(op.out[l]) = out[l];
      return;
    }
    case WarpOpKind::kLdmatrix: {
      const int matrices = op.variant / 2;
      const bool transposed = (op.variant % 2) != 0;
      std::uint16_t rows[4][8][8] = {};
      for (int j = 0; j < matrices; ++j) {
        for (int r = 0; r < 8; ++r) {
          const int lane = j * 8 + r;
          const void* row = op.p0[lane];
          // Each row is a 16-byte read by the lane that addressed it.
          if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) {
            report(first + lane, "ldmatrix row address not 16-byte aligned", op.line);
            continue;
          }
          if (check_shared(first + lane, row, row, 16, false, op.line)) {
            std::memcpy(rows[j][r], row, 16);
          }
        }
      }
      std::uint32_t out[kWarpSize][4] = {};
      ldmatrix(matrices, transposed, rows, out);
      for (int l = 0; l < kWarpSize; ++l) {
        std::memcpy(op.out[l], out[l], sizeof(std::uint32_t) * static_cast<std::size_t>(matrices));
      }
      return;
    }
    case WarpOpKind::kMma: {
      if (op.variant == CJ_MMA_M8N8K4_F64) {
        double a[kWarpSize], b[kWarpSize], acc[kWarpSize][2];
        for (int l = 0; l < kWarpSize; ++l) {
          a[l] = *static_cast<const double*>(op.p0[l]);
          b[l] = *static_cast<const double*>(op.p1[l]);
          std::memcpy(acc[l], op.out[l], sizeof acc[l]);
        }
        mma_m8n8k4_f64(a, b, acc);
        for (int l = 0; l < kWarpSize; ++l) std::memcpy(op.out[l], acc[l], sizeof acc[l]);
        return;
      }
      std::uint32_t a[kWarpSize][4], b[kWarpSize][2];
      float acc[kWarpSize][4];
      for (int l = 0; l < kWarpSize; ++l) {
        std::memcpy(a[l], op.p0[l], sizeof a[l]);
        std::memcpy(b[l], op.p1[l], sizeof b[l]);
        std::memcpy(acc[l], op.out[l], sizeof acc[l]);
      }
      if (op.variant == CJ_MMA_M16N8K8_TF32) {
        mma_m16n8k8_tf32(a, b, acc);
      } else {
        mma_m16n8k16(a, b, acc, op.variant == CJ_MMA_M16N8K16_BF16);
      }
      for (int l = 0; l < kWarpSize; ++l) std::memcpy(op.out[l], acc[l], sizeof acc[l]);
      return;
    }
    case WarpOpKind::kNone:
      return;
  }
}

void BlockRunner::Impl::finish_thread(ThreadContext& t) {
  int pending_line = 0;
  for (const AsyncCopy& c : t.open_group) pending_line = c.line;
  for (const auto& group : t.committed) {
    for (const AsyncCopy& c : group) pending_line = c.line;
  }
  if (pending_line != 0) {
    report(t.linear, "cp.async copies (the last issued here) were never waited for", pending_line);
  }
  t.state = ThreadState::kDone;
}

std::string BlockRunner::Impl::describe_deadlock(const ThreadContext& waiting) {
  auto where = [](const ThreadContext& t) {
    return fmt::format(
        "{} (line {})",
        t.state == ThreadState::kAtBarrier ? "__syncthreads()" : "a warp-level operation",
        t.wait_line);
  };
  if (waiting.state == ThreadState::kInWarpOp) {
    const int warp = waiting.linear / kWarpSize;
    int exited = 0;
    const ThreadContext* elsewhere = nullptr;
    for (int l = 0; l < kWarpSize && warp * kWarpSize + l < thread_count; ++l) {
      const ThreadContext& lane = *threads[static_cast<std::size_t>(warp * kWarpSize + l)];
      if (lane.state == ThreadState::kDone) {
        ++exited;
      } else if (lane.state != ThreadState::kInWarpOp && elsewhere == nullptr) {
        elsewhere = &lane;
      }
    }
    if (elsewhere != nullptr) {
      return fmt::format(
          "deadlock: divergent warp: this lane waits at {} while lane {} of its "
          "warp waits at {}",
          where(waiting), elsewhere->linear % kWarpSize, where(*elsewhere));
    }
    return fmt::format(
        "divergent warp-level operation: lanes of warp {} wait at {} for {} lanes "
        "that exited without taking part",
        warp, where(waiting), exited);
  }
  for (int i = 0; i < thread_count; ++i) {
    const ThreadContext& t = *threads[static_cast<std::size_t>(i)];
    if (t.state != ThreadState::kDone &&
        (t.state != waiting.state || t.wait_line != waiting.wait_line)) {
      return fmt::format(
          "deadlock: divergent barriers: this thread waits at {} while thread {} "
          "waits at {}",
          where(waiting), thread_name(i), where(t));
    }
  }
  return fmt::format("deadlock at {}", where(waiting));
}

BlockRunner::BlockRunner() : impl_(std::make_unique<Impl>()) {}
BlockRunner::~BlockRunner() = default;

BlockRunner& BlockRunner::for_this_thread() {
  thread_local BlockRunner runner;
  return runner;
}

void BlockRunner::run_block(const LaunchInfo& launch, std::int64_t linear_block,
                            ErrorSink* errors) {
  Impl& r = *impl_;
  r.launch = &launch;
  r.errors = errors;
  r.aborting = false;
  const std::int64_t gx = launch.grid.x, gy = launch.grid.y;
  r.block_index = {static_cast<unsigned>(linear_block % gx),
                   static_cast<unsigned>((linear_block / gx) % gy),
                   static_cast<unsigned>(linear_block / (gx * gy))};
  const int bx = static_cast<int>(launch.block.x), by = static_cast<int>(launch.block.y);
  const int n = bx * by * static_cast<int>(launch.block.z);
  r.thread_count = n;
  while (static_cast<int>(r.threads.size()) < n) {
    r.threads.push_back(std::make_unique<ThreadContext>());
    r.stacks.push_back(std::make_unique<FiberStack>(kStackBytes));
    if (!r.stacks.back()->ok()) {
      r.threads.pop_back();
      r.stacks.pop_back();
      errors->report(fmt::format("cuda-interpret: kernel {}: cannot map a stack for thread {}",
                                 launch.kernel, r.threads.size()));
      return;
    }
  }
  r.shared.begin_block();
  r.warps.assign(static_cast<std::size_t>((n + kWarpSize - 1) / kWarpSize), WarpOp{});
  for (int i = 0; i < n; ++i) {
    ThreadContext& t = *r.threads[static_cast<std::size_t>(i)];
    t.index = {static_cast<unsigned>(i % bx), static_cast<unsigned>((i / bx) % by),
               static_cast<unsigned>(i / (bx * by))};
    t.linear = i;
    t.state = ThreadState::kRunnable;
    t.wait_line = 0;
    t.next_shared = 0;
    t.open_group.clear();
    t.committed.clear();
    t.name.clear();
    t.fiber.start(r.stacks[static_cast<std::size_t>(i)].get(), &thread_main, &t);
  }
  Impl* const previous = t_impl;
  t_impl = &r;
  while (!r.aborting) {
    for (int i = 0; i < n && !r.aborting; ++i) {
      ThreadContext& t = *r.threads[static_cast<std::size_t>(i)];
      if (t.state != ThreadState::kRunnable) continue;
      r.current = &t;
      t.fiber.resume();
    }
    if (r.aborting) break;
    int done = 0, at_barrier = 0, runnable = 0;
    for (int i = 0; i < n; ++i) {
      switch (r.threads[static_cast<std::size_t>(i)]->state) {
        case ThreadState::kDone:
          ++done;
          break;
        case ThreadState::kAtBarrier:
          ++at_barrier;
          break;
        case ThreadState::kRunnable:
          ++runnable;
          break;
        case ThreadState::kInWarpOp:
          break;
      }
    }
    if (done == n) break;
    if (runnable > 0) continue;
    ThreadContext* waiting = nullptr;
    ThreadContext* other = nullptr;
    for (int i = 0; i < n; ++i) {
      ThreadContext& t = *r.threads[static_cast<std::size_t>(i)];
      if (t.state == ThreadState::kDone) continue;
      if (waiting == nullptr) {
        waiting = &t;
      } else if (other == nullptr &&
                 (t.state != waiting->state || t.wait_line != waiting->wait_line)) {
        other = &t;
      }
    }
    if (at_barrier == n - done && other == nullptr) {
      r.shared.next_interval();
      for (int i = 0; i < n; ++i) {
        ThreadContext& t = *r.threads[static_cast<std::size_t>(i)];
        if (t.state == ThreadState::kAtBarrier) t.state = ThreadState::kRunnable;
      }
      continue;
    }
    // Nobody can go on: threads wait at different barriers, or in a warp-level operation
    // whose other lanes wait elsewhere or have exited.
    r.report(waiting->linear, r.describe_deadlock(*waiting), waiting->wait_line);
    break;
  }
  r.current = nullptr;
  t_impl = previous;
}

}  // namespace convjit::runtime::interpret
