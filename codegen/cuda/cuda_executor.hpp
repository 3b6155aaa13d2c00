// Where the CUDA backend's programs run. The backend plans and generates; an executor loads the
// result and launches it: a GPU through the driver API (runtime/cuda) or the host interpreter
// (runtime/cuda/interpret). The runtime creates the executor and hands it to the backend, so
// codegen/ never depends on the driver or the interpreter.
#pragma once

#include <memory>
#include <string>

#include "codegen/backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/nvrtc_compiler.hpp"
#include "frontend/problem.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// A loaded program, ready to launch. Immutable; run() is thread-safe.
class CudaModule {
 public:
  virtual ~CudaModule() = default;
  /// Runs `program`'s launches in order (on context.stream for a GPU) with the operands and
  /// the workspace (the caller's from `context`, checked for size, or the module's own).
  virtual Status run(const CudaProgram& program, const OperandPointers& operands,
                     const RunContext& context) const = 0;
  /// Host memory the module keeps (its code), for the memory cache's bound.
  virtual std::size_t resident_bytes() const { return 0; }
};

class CudaExecutor {
 public:
  virtual ~CudaExecutor() = default;
  /// "cuda:0", "cuda-interpret".
  virtual const std::string& device() const = 0;
  virtual MemorySpace memory_space() const = 0;
  /// The device the plan is made for.
  virtual const CudaDeviceInfo& device_info() const = 0;
  /// The target part of the cache key: "sm_90a/nvrtc13.0", "interpret-sm_80/g++ 12.2.0 ...".
  virtual std::string target_name() const = 0;
  /// Whether load() needs NVRTC's cubin (a GPU) or builds the body itself (the interpreter).
  virtual bool needs_cubin() const = 0;
  /// Loads a freshly generated program; `binary` is NVRTC's output when needs_cubin(). Adds
  /// what a later load_stored() needs besides the CUDA source and the cubin to `artifacts`.
  virtual Expected<std::shared_ptr<const CudaModule>> load(const CudaProgram& program,
                                                           const CudaBinary* binary,
                                                           Artifacts* artifacts) const = 0;
  /// Whether time_program_us() measures anything (a GPU).
  virtual bool can_time() const { return false; }
  /// Microseconds one run of a loaded program takes on the device, on scratch operands the
  /// executor allocates (for CONVJIT_CUDA_TUNE). Unavailable where nothing can be timed (the
  /// interpret mode: its speed says nothing about a GPU's).
  virtual Expected<double> time_program_us(const CudaModule& module,
                                           const CudaProgram& program) const {
    (void)module;
    (void)program;
    return Status(StatusCode::kUnavailable, "this executor cannot time kernels (no GPU)");
  }
  /// Loads a program from a disk-cache entry's artifacts ("cu", "cubin", the executor's own).
  virtual Expected<std::shared_ptr<const CudaModule>> load_stored(
      const CudaProgram& program, const Artifacts& artifacts) const = 0;
};

}  // namespace convjit::codegen
