// The interpreter's side of cj_interpret_api: what a kernel built for the host calls for its
// special registers, memory accesses (with their bounds, race and initialisation checks),
// barriers, warp-level operations and cp.async copies.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/cuda/interpret/block_state.hpp"

namespace convjit::runtime::interpret {
namespace {

std::string_view access_name(bool is_write) { return is_write ? "write" : "read"; }

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

}  // namespace convjit::runtime::interpret
