// KernelImpl: what a convjit::Kernel handle holds. A compiled artifact (shared through the
// cache) plus what belongs to one compile() call: the caller's descriptor, where the artifact
// came from, and the caller's parallel loop.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "codegen/backend.hpp"
#include "convjit/types.hpp"
#include "frontend/problem.hpp"
#include "support/parallel.hpp"
#include "support/status.hpp"

namespace convjit::runtime {

/// A "handed out since you last looked" flag. compile()'s descriptor memo returns kernels
/// without going through the memory cache's LRU list (that would mean taking its lock on every
/// hit), so it sets this instead and the cache gives a marked entry a second chance before
/// evicting it. A copy starts unmarked: it is a different cache entry.
class UseMark {
 public:
  UseMark() = default;
  UseMark(const UseMark&) noexcept {}
  UseMark& operator=(const UseMark&) noexcept { return *this; }

  /// Reads before writing so that many threads hitting one kernel share its cache line.
  void mark() const noexcept {
    if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  }
  /// Whether it was marked, clearing the mark.
  bool take() const noexcept {
    return used_.load(std::memory_order_relaxed) && used_.exchange(false, std::memory_order_relaxed);
  }

 private:
  mutable std::atomic<bool> used_{false};
};

/// The memory cache's bookkeeping for one kernel: whether it is in the cache, and its resident
/// bytes when last looked at (KernelCache::note_run). A copy starts out of the cache: it is a
/// different kernel object.
struct CacheResidence {
  CacheResidence() = default;
  CacheResidence(const CacheResidence&) noexcept {}
  CacheResidence& operator=(const CacheResidence&) noexcept { return *this; }

  mutable std::atomic<bool> in_cache{false};
  mutable std::atomic<std::size_t> resident_seen{0};
};

/// One compiled problem: immutable (but for `use_mark`), shared by every handle and by the cache.
struct CompiledKernel {
  ConvProblem problem;
  /// The backend that generated `code` ("x86", "interpreter"); may differ from the one asked
  /// for when that one did not support the nest.
  std::string backend;
  /// The device the code runs on ("cpu", "cuda:0", "cuda-interpret") and where it expects
  /// its tensors.
  std::string device = "cpu";
  codegen::MemorySpace memory_space = codegen::MemorySpace::kHost;
  /// CompiledCode::name(), or "zero_fill" for a problem with an empty operand.
  std::string name;
  /// Wall time lowering, scheduling and code generation took.
  double compile_ms = 0;
  /// Null for empty problems, whose result is all zeros without any code.
  std::shared_ptr<const codegen::CompiledCode> code;
  /// Threads a run may use.
  int num_threads = 1;
  /// Set by memo hits; read by the memory cache's eviction (see UseMark).
  UseMark use_mark;
  /// The memory cache's bookkeeping (see CacheResidence).
  CacheResidence residence;
};

/// One operand of a run as the APIs pass it: no ownership, no allocation.
struct OperandArg {
  DType dtype = DType::kFloat32;
  std::span<const std::int64_t> shape;
  void* data = nullptr;
};

/// The problem's tensor behind operand 0 (a), 1 (b) and 2 (out) of Kernel::run, per
/// convjit.hpp: forward a=X b=W out=Y; backprop data a=W b=Y out=X; backprop filter a=X b=Y out=W.
std::array<TensorRole, 3> operand_roles(ConvDirection direction);

/// TensorFlow's argument name of operand `index` of `op`: "filter", "out_backprop", ...
std::string_view operand_name(OpKind op, int index);

/// Checks every operand (data present unless empty, dtype, rank 4, exact shape) against
/// `problem`; an InvalidArgument naming the operand and expected vs actual shape otherwise.
/// Then check_no_alias. On success fills `pointers` with the data of each role.
Status check_operands(OpKind op, const ConvProblem& problem, const std::array<OperandArg, 3>& args,
                      OperandPointers* pointers);

/// InvalidArgument naming both operands when the output's bytes overlap either input's (an
/// exact alias or any partial overlap); tensors that merely touch, or are empty, are fine.
Status check_no_alias(OpKind op, const ConvProblem& problem, const std::array<OperandArg, 3>& args);

}  // namespace convjit::runtime

namespace convjit::detail {

/// The state behind a convjit::Kernel. Immutable after construction; run() is thread-safe.
class KernelImpl {
 public:
  KernelImpl(std::shared_ptr<const runtime::CompiledKernel> compiled, OpKind op,
             std::string descriptor, std::string cache_source, ParallelFor parallel_for);

  /// Checks the operands and computes the op; empty problems zero-fill the output. `context`
  /// carries a device kernel's stream and workspace (its parallel_for is ignored). CPU kernels
  /// run their parallel loops on `parallel_for` when the caller gives one (a framework's pool,
  /// for this run only), else on the compile options' loop, the hook or convjit's pool.
  Status run(const std::array<runtime::OperandArg, 3>& args,
             const codegen::RunContext& context = {}, const ParallelFor& parallel_for = {}) const;

  const runtime::CompiledKernel& compiled() const { return *compiled_; }
  const std::shared_ptr<const runtime::CompiledKernel>& compiled_ptr() const { return compiled_; }
  const ConvProblem& problem() const { return compiled_->problem; }
  OpKind op() const { return op_; }
  /// Canonical text of the caller's descriptor.
  const std::string& descriptor() const { return descriptor_; }
  const std::string& backend() const { return compiled_->backend; }
  const std::string& device() const { return compiled_->device; }
  std::size_t workspace_bytes() const {
    return compiled_->code ? compiled_->code->workspace_bytes() : 0;
  }
  const std::string& name() const { return compiled_->name; }
  /// "memory", "disk" or "none".
  const std::string& cache_source() const { return cache_source_; }
  /// Compile time this handle paid: 0 from the memory cache; from the disk cache, the time
  /// getting it from there took.
  double compile_ms() const { return cache_source_ == "memory" ? 0.0 : compiled_->compile_ms; }
  std::size_t scratch_bytes() const {
    return compiled_->code ? compiled_->code->scratch_bytes() : 0;
  }
  /// Shape of operand 0 (a), 1 (b) or 2 (out).
  std::array<std::int64_t, 4> operand_shape(int index) const;

 private:
  std::shared_ptr<const runtime::CompiledKernel> compiled_;
  OpKind op_;
  std::string descriptor_;
  std::string cache_source_;
  ParallelFor parallel_for_;
};

}  // namespace convjit::detail
