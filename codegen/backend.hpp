// The seam between the front end and the code generators. A Backend owns its whole path from a
// ConvProblem to runnable code, in three steps that every backend takes in the same order
// (codegen::compile below):
//
//   plan(problem, options)      one decision point: every choice the kernel's code depends on
//   schedule(lowered nest, plan) the backend's own pass list, carrying the plan out
//   emit(scheduled nest, plan)  machine code, or source compiled by the backend's compiler
//
// Backends see the ConvProblem and the IR, never the user's attribute strings; each lives in
// its own folder under codegen/ (docs/ARCHITECTURE.md has the checklist for adding one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "convjit/convjit.hpp"
#include "frontend/problem.hpp"
#include "ir/ir.hpp"
#include "ir/pass.hpp"
#include "support/parallel.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// Where a backend's kernels expect their tensors.
enum class MemorySpace : std::uint8_t {
  kHost,        // host memory (CPU backends, the interpreter, the CUDA interpret mode)
  kCudaDevice,  // CUDA device memory of the backend's device
};

/// What the caller chose that changes the generated code (all of it is in the cache key).
struct PlanOptions {
  /// Threads a CPU run may use (>= 1).
  int num_threads = 1;
  MathMode math_mode = MathMode::kExact;
  bool deterministic = true;
  /// Device backends: time a few candidate plans on the device and keep the fastest
  /// (CONVJIT_CUDA_TUNE=1; part of the cache key, so the tuned winner is stored apart).
  bool tune = false;
  /// Test and tuning hook: "key=value,..." choices the plan takes instead of its model's (each
  /// backend documents its keys; an unknown key is InvalidArgument). Empty in normal use.
  std::string forced;
};

/// The canonical text of `options` for cache keys, one "name=value" line each: the thread
/// count always, the rest only where it differs from the defaults.
std::string options_key(const PlanOptions& options);

/// Everything a run needs besides its operands.
struct RunContext {
  /// CPU kernels: how parallel loops run (convjit's pool, a framework's hook, or serial).
  ParallelFor parallel_for = serial_for;
  /// Device kernels: the stream to queue on (nullptr: the default stream).
  void* stream = nullptr;
  /// Device kernels: the caller's workspace, or nullptr to use the kernel's own.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

/// A backend's decisions for one problem. Each backend derives its own (CpuPlan, CudaPlan);
/// the base gives the runtime what it logs and stores.
class Plan {
 public:
  virtual ~Plan() = default;
  /// Every decision in one line ("threads=2 split=batch tile=r6x2v ..."), for CONVJIT_VERBOSE
  /// and `convjit cache show`.
  virtual std::string describe() const = 0;
};

/// Named byte blobs a compile leaves for the disk cache and a later load(): "code" (machine
/// code), "load" (what load() needs besides it), "cu" (CUDA source), "cubin", ...
using Artifacts = std::map<std::string, std::vector<std::uint8_t>>;

/// Runnable code for one problem. Immutable after emit; run() is thread-safe.
class CompiledCode {
 public:
  virtual ~CompiledCode() = default;
  /// Computes the op on the caller's tensors (shapes and memory space already checked).
  virtual Status run(const OperandPointers& operands, const RunContext& context) const = 0;
  /// Self-describing kernel name printed from the plan, e.g.
  /// "x86_avx512_f32_bwd_data_nhwc_r6x2v_cb64_par_n".
  virtual const std::string& name() const = 0;
  /// Host scratch bytes one run uses (packed filter, partial sums, operand copies).
  virtual std::size_t scratch_bytes() const = 0;
  /// Device workspace bytes one run needs (0 for host kernels).
  virtual std::size_t workspace_bytes() const { return 0; }
  /// Generated machine code, for disassembly and JIT dumps (empty when there is none).
  virtual std::span<const std::uint8_t> code_bytes() const { return {}; }
  /// Host memory the code keeps between runs (its machine code and idle scratch), for the
  /// memory cache's byte bound.
  virtual std::size_t resident_bytes() const { return scratch_bytes(); }
  /// Drops scratch kept for the next run (the next run allocates again). Thread-safe.
  virtual void release_idle_memory() const {}
  /// What the disk cache stores so that Backend::load() can rebuild this code in another
  /// process without planning or generating it again; empty when the backend cannot reload.
  virtual Artifacts artifacts() const { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// "x86", "interpreter", "cuda", ...
  virtual std::string_view name() const = 0;
  /// The device this instance generates for: "cpu", "cuda:0", "cuda-interpret".
  virtual const std::string& device() const = 0;
  virtual MemorySpace memory_space() const = 0;
  /// The target as the cache key and the disk cache name it: "avx512+bf16", "generic",
  /// "sm_90a/nvrtc13.0", ... Two instances with the same name generate the same code.
  virtual std::string target_name() const = 0;

  /// Every decision for `problem`. Unimplemented when this backend cannot take the problem at
  /// all (the runtime then falls back to the interpreter and logs the reason).
  virtual Expected<std::unique_ptr<const Plan>> plan(const ConvProblem& problem,
                                                    const PlanOptions& options) const = 0;
  /// The backend's pass list over the lowered nest, carrying `plan` out. `observer` sees the
  /// nest after every pass (CONVJIT_VERBOSE=2, `convjit cache show`, the pass tests).
  virtual ir::LoopNest schedule(ir::LoopNest nest, const Plan& plan,
                                const ir::PassObserver& observer) const = 0;
  /// Code for the scheduled nest. Unimplemented when some construct is beyond this backend
  /// (a fallback, as for plan()).
  virtual Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest& nest,
                                                      const Plan& plan) const = 0;
  /// Rebuilds code from an earlier compile's artifacts() without planning or generating. The
  /// caller vouches for the bytes (the disk cache checked their checksums and that they were
  /// stored under this backend's key); the backend still refuses artifacts made for another
  /// target. Unimplemented by default.
  virtual Expected<std::unique_ptr<CompiledCode>> load(const Artifacts& artifacts) const;
};

/// What codegen::compile() can leave beside the code.
struct CompileTrace {
  /// Called with the plan's describe() once it is made.
  std::function<void(std::string_view plan)> plan_observer;
  /// Called with "lower" and the lowered nest, then after every pass.
  ir::PassObserver observer;
  /// When set, receives the plan's describe() and the scheduled IR's text.
  std::string* plan_text = nullptr;
  std::string* ir_text = nullptr;
};

/// plan -> lower -> schedule -> emit, once. The one way the runtime and the tools compile.
Expected<std::unique_ptr<CompiledCode>> compile(const Backend& backend, const ConvProblem& problem,
                                                const PlanOptions& options,
                                                const CompileTrace& trace = {});

}  // namespace convjit::codegen
