// compile(): descriptor to kernel. A request answered before comes straight from the descriptor
// memo; otherwise validate -> cache lookup -> lower and schedule -> backend compile ->
// KernelImpl, timed and logged.
#pragma once

#include <memory>

#include "convjit/convjit.hpp"
#include "runtime/kernel.hpp"
#include "support/status.hpp"

namespace convjit::runtime {

/// Validates `desc` (TensorFlow's rules and texts), then returns the cached kernel for its
/// problem on the chosen backend, compiling it on a miss. A repeated request is answered from
/// the descriptor memo, as a memory hit, without validating or hashing again.
Expected<std::shared_ptr<const detail::KernelImpl>> compile_kernel(const OpDescriptor& desc,
                                                                   const CompileOptions& options);

}  // namespace convjit::runtime
