#include "runtime/cuda/interpret/block_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "runtime/cuda/interpret/fiber.hpp"
#include "runtime/cuda/interpret/shared_memory.hpp"
#include "runtime/cuda/interpret/warp_ops.hpp"

namespace convjit::runtime::interpret {
namespace {

// Kernel frames are small; the interpreter's own calls (checks, messages) run on these stacks
// too, and sanitizer builds grow frames. Only touched pages cost memory.
constexpr std::size_t kStackBytes = 256 * 1024;

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

namespace {

thread_local BlockRunner::Impl* t_impl = nullptr;

std::string_view access_name(bool is_write) { return is_write ? "write" : "read"; }

void thread_main(void* arg) {
  auto* t = static_cast<ThreadContext*>(arg);
  BlockRunner::Impl& r = *t_impl;
  const KernelArgs args = r.launch->args;
  r.launch->entry(args);
  r.finish_thread(*t);
}

const cj_dim3* api_thread_idx() { return &t_impl->current->index; }
const cj_dim3* api_block_idx() { return &t_impl->block_index; }
const cj_dim3* api_block_dim() { return &t_impl->launch->block; }
const cj_dim3* api_grid_dim() { return &t_impl->launch->grid; }

int api_global_access(const void* base, const void* address, unsigned long bytes, int is_write,
                      int line) {
  return t_impl->check_global(base, address, bytes, is_write != 0, line) ? 1 : 0;
}

int api_shared_access(const void* base, const void* address, unsigned long bytes, int is_write,
                      int line) {
  BlockRunner::Impl& r = *t_impl;
  return r.check_shared(r.current->linear, base, address, bytes, is_write != 0, line) ? 1 : 0;
}

void* api_shared_array(unsigned long bytes, unsigned long align, const char* name, int line) {
  BlockRunner::Impl& r = *t_impl;
  std::string error;
  std::byte* p =
      r.shared.declare(r.current->next_shared++, bytes, std::max(1ul, align), name, &error);
  if (p == nullptr) r.report(error, line);
  return p;
}

void api_sync_threads(int line) {
  BlockRunner::Impl& r = *t_impl;
  ThreadContext* t = r.current;
  t->state = ThreadState::kAtBarrier;
  t->wait_line = line;
  t->fiber.yield();
}

void api_shfl(int mode, unsigned value, int operand, unsigned* out, int line) {
  BlockRunner::Impl& r = *t_impl;
  if (mode < CJ_SHFL_IDX || mode > CJ_SHFL_XOR) {
    r.report(fmt::format("unknown shuffle mode {}", mode), line);
    r.abort_block();
  }
  BlockRunner::Impl::LaneOperands mine;
  mine.out = out;
  mine.value = value;
  mine.operand = operand;
  r.arrive(WarpOpKind::kShuffle, mode, line, mine);
}

void api_ldmatrix(int matrices, int transposed, const void* row, unsigned* out, int line) {
  BlockRunner::Impl& r = *t_impl;
  if (matrices != 1 && matrices != 2 && matrices != 4) {
    r.report(fmt::format("ldmatrix of {} matrices (1, 2 or 4)", matrices), line);
    r.abort_block();
  }
  BlockRunner::Impl::LaneOperands mine;
  mine.p0 = row;
  mine.out = out;
  r.arrive(WarpOpKind::kLdmatrix, matrices * 2 + (transposed != 0 ? 1 : 0), line, mine);
}

void api_mma(int shape, const void* a, const void* b, void* acc, int line) {
  BlockRunner::Impl& r = *t_impl;
  if (shape < CJ_MMA_M16N8K16_F16 || shape > CJ_MMA_M8N8K4_F64) {
    r.report(fmt::format("unknown mma shape {}", shape), line);
    r.abort_block();
  }
  BlockRunner::Impl::LaneOperands mine;
  mine.p0 = a;
  mine.p1 = b;
  mine.out = acc;
  r.arrive(WarpOpKind::kMma, shape, line, mine);
}

void api_cp_async(void* shared, const void* global, int bytes, int src_bytes, int line) {
  BlockRunner::Impl& r = *t_impl;
  if ((bytes != 4 && bytes != 8 && bytes != 16) || src_bytes < 0 || src_bytes > bytes) {
    r.report(fmt::format("cp.async of {} bytes with {} source bytes (4, 8 or 16; source at most "
                         "the size)",
                         bytes, src_bytes),
             line);
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(shared) % static_cast<std::uintptr_t>(bytes) != 0 ||
      (src_bytes > 0 &&
       reinterpret_cast<std::uintptr_t>(global) % static_cast<std::uintptr_t>(bytes) != 0)) {
    r.report(fmt::format("misaligned cp.async of {} bytes", bytes), line);
    return;
  }
  // Bounds now; the copy itself (and its race bookkeeping) when its group is waited on.
  const SharedMemory::Array* array = r.shared.find(shared);
  const std::size_t offset = array != nullptr ? r.shared.offset_of(shared) : 0;
  if (array == nullptr || offset + static_cast<std::size_t>(bytes) > array->offset + array->bytes) {
    r.report(fmt::format("cp.async of {} bytes to shared memory outside every __shared__ array "
                         "(or past its end)",
                         bytes),
             line);
    return;
  }
  if (src_bytes > 0 &&
      !r.check_global(global, global, static_cast<std::size_t>(src_bytes), false, line)) {
    return;
  }
  r.current->open_group.push_back({static_cast<std::byte*>(shared),
                                   static_cast<const std::byte*>(global), bytes, src_bytes, line});
}

void api_cp_async_commit() {
  ThreadContext* t = t_impl->current;
  t->committed.push_back(std::move(t->open_group));
  t->open_group.clear();
}

void api_cp_async_wait(int pending, int line) {
  BlockRunner::Impl& r = *t_impl;
  ThreadContext* t = r.current;
  (void)line;
  while (t->committed.size() > static_cast<std::size_t>(std::max(0, pending))) {
    r.perform_copies(t->committed.front());
    t->committed.pop_front();
  }
}

const cj_interpret_api kApi = {
    CJ_INTERPRET_ABI_VERSION,
    &api_thread_idx,
    &api_block_idx,
    &api_block_dim,
    &api_grid_dim,
    &api_global_access,
    &api_shared_access,
    &api_shared_array,
    &api_sync_threads,
    &api_shfl,
    &api_ldmatrix,
    &api_mma,
    &api_cp_async,
    &api_cp_async_commit,
    &api_cp_async_wait,
};

}  // namespace

const cj_interpret_api* interpret_api() { return &kApi; }

bool BlockRunner::Impl::check_global(const void* base, const void* address, std::size_t bytes,
                                     bool is_write, int line) {
  const auto* b = static_cast<const std::byte*>(base);
  const GlobalBuffer* buffer = nullptr;
  for (const GlobalBuffer& candidate : launch->buffers) {
    if (candidate.base != nullptr && b >= candidate.base && b < candidate.base + candidate.bytes) {
      buffer = &candidate;
    }
  }
  if (buffer == nullptr) {
    report(fmt::format("global {} of {} bytes through a pointer outside every buffer of the "
                       "launch ({})",
                       access_name(is_write), bytes, base),
           line);
    return false;
  }
  const std::ptrdiff_t offset = static_cast<const std::byte*>(address) - buffer->base;
  if (offset < 0 || static_cast<std::size_t>(offset) + bytes > buffer->bytes) {
    report(fmt::format("out-of-bounds global {} of {} bytes at byte offset {} of {} ({} bytes, "
                       "element {} of {})",
                       access_name(is_write), bytes, offset, buffer->name, buffer->bytes,
                       offset / static_cast<std::ptrdiff_t>(bytes), buffer->bytes / bytes),
           line);
    return false;
  }
  if (is_write && !buffer->writable) {
    report(fmt::format("write of {} bytes at byte offset {} of the read-only input {}", bytes,
                       offset, buffer->name),
           line);
    return false;
  }
  if (reinterpret_cast<std::uintptr_t>(address) % bytes != 0) {
    report(fmt::format("misaligned global {} of {} bytes at byte offset {} of {}",
                       access_name(is_write), bytes, offset, buffer->name),
           line);
    return false;
  }
  return true;
}

bool BlockRunner::Impl::check_shared(int thread, const void* base, const void* address,
                                     std::size_t bytes, bool is_write, int line) {
  const SharedMemory::Array* array = shared.find(base);
  if (array == nullptr) {
    report(thread,
           fmt::format("shared {} of {} bytes through a pointer outside every __shared__ array",
                       access_name(is_write), bytes),
           line);
    return false;
  }
  const std::ptrdiff_t offset =
      static_cast<const std::byte*>(address) - static_cast<const std::byte*>(base);
  const std::ptrdiff_t base_offset =
      static_cast<std::ptrdiff_t>(shared.offset_of(base) - array->offset);
  const std::ptrdiff_t in_array = base_offset + offset;
  if (in_array < 0 || static_cast<std::size_t>(in_array) + bytes > array->bytes) {
    report(thread,
           fmt::format("out-of-bounds shared {} of {} bytes at byte offset {} of {} ({} bytes, "
                       "element {} of {})",
                       access_name(is_write), bytes, in_array, array->name, array->bytes,
                       in_array / static_cast<std::ptrdiff_t>(bytes), array->bytes / bytes),
           line);
    return false;
  }
  if (reinterpret_cast<std::uintptr_t>(address) % bytes != 0) {
    report(thread,
           fmt::format("misaligned shared {} of {} bytes at byte offset {} of {}",
                       access_name(is_write), bytes, in_array, array->name),
           line);
    return false;
  }
  const std::string problem = shared.record(
      array->offset + static_cast<std::size_t>(in_array), bytes, is_write, thread, line,
      [](int t, void* context) -> const std::string& {
        return static_cast<BlockRunner::Impl*>(context)->thread_name(t);
      },
      this);
  if (!problem.empty()) report(thread, problem, line);
  return true;
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

void BlockRunner::Impl::perform_copies(std::vector<AsyncCopy>& group) {
  for (const AsyncCopy& c : group) {
    std::byte staged[16] = {};
    if (c.src_bytes > 0) std::memcpy(staged, c.global, static_cast<std::size_t>(c.src_bytes));
    const std::string problem = shared.record(
        shared.offset_of(c.shared), static_cast<std::size_t>(c.bytes), true, current->linear,
        c.line,
        [](int t, void* context) -> const std::string& {
          return static_cast<BlockRunner::Impl*>(context)->thread_name(t);
        },
        this);
    if (!problem.empty()) report(problem, c.line);
    std::memcpy(c.shared, staged, static_cast<std::size_t>(c.bytes));
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
