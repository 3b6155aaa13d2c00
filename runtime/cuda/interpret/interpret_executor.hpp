// The interpret mode's CudaExecutor: programs of the CUDA backend built for the host and run by
// the block interpreter, on host memory. Device "cuda-interpret" (and "cuda" with
// CONVJIT_CUDA_INTERPRET=1).
#pragma once

#include <memory>

#include "codegen/cuda/cuda_executor.hpp"
#include "support/status.hpp"

namespace convjit::runtime::interpret {

/// Artifact holding the kernel's shared object, so a later process loads it without compiling.
inline constexpr const char* kHostObjectArtifact = "host_object";

/// The interpreter's executor. Plans are made for an sm_80 (the arch every convjit kernel
/// family runs on, tensor cores included). Unavailable when no host C++ compiler is found.
Expected<std::shared_ptr<const codegen::CudaExecutor>> make_interpret_executor();

}  // namespace convjit::runtime::interpret
