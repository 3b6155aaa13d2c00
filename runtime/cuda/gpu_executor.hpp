// The CUDA backend's executor for a real GPU: the device's resources from the driver, NVRTC's
// cubin loaded as a module (its PTX when the driver has no binary for the device), launches on
// the caller's stream, workspace from the caller (checked for size) or a cached allocation per
// stream, and a clear error for a pointer that is not memory of this device.
#pragma once

#include <memory>

#include "codegen/cuda/cuda_executor.hpp"
#include "support/status.hpp"

namespace convjit::runtime::cuda {

/// The executor of CUDA device `ordinal`. "no CUDA device: <reason>" (Unavailable) without a
/// driver, a GPU or that ordinal; never a crash.
Expected<std::shared_ptr<const codegen::CudaExecutor>> make_gpu_executor(int ordinal);

}  // namespace convjit::runtime::cuda
