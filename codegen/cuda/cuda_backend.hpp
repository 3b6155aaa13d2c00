// The CUDA backend: a CudaPlan per problem, one generated CUDA C++ translation unit per plan,
// compiled by NVRTC for the device's exact architecture (or built for the host by the
// interpret mode), and run by the CudaExecutor the runtime gives it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "codegen/backend.hpp"
#include "codegen/cuda/cuda_executor.hpp"
#include "codegen/cuda/cuda_plan.hpp"
#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/nvrtc_compiler.hpp"

namespace convjit::codegen {

/// The backend's registry name.
inline constexpr std::string_view kCudaBackendName = "cuda";

/// Artifact names of stored CUDA code.
inline constexpr const char* kCudaSourceArtifact = "cu";        // the generated body
inline constexpr const char* kCudaLaunchArtifact = "launches";  // launches_to_text()
inline constexpr const char* kCudaCubinArtifact = "cubin";
inline constexpr const char* kCudaPtxArtifact = "ptx";
inline constexpr const char* kCudaResourcesArtifact = "resources";  // resources_to_text()

/// A Backend named "cuda" running its programs on `executor`.
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const CudaExecutor> executor);

/// The CUDA side of a CompiledCode made by this backend (nullptr for any other code).
struct CudaCodeInfo {
  const CudaProgram* program = nullptr;
  /// NVRTC's output; empty for the interpret mode, which does not call NVRTC.
  const CudaBinary* binary = nullptr;
};
CudaCodeInfo cuda_code_info(const CompiledCode& code);

/// Everything `convjit compile --target sm_XX` reports: plan, program and NVRTC's result for a
/// named architecture, with no device and nothing run.
struct CudaCompileReport {
  std::string plan_text;
  CudaProgram program;
  CudaBinary binary;
  std::string nvrtc_version;
  double generate_ms = 0;
};
Expected<CudaCompileReport> compile_cuda_for_target(const ConvProblem& problem,
                                                    const CudaDeviceInfo& device,
                                                    const PlanOptions& options);

}  // namespace convjit::codegen
