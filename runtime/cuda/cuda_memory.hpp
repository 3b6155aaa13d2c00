// Device memory and copies on CUDA device `ordinal` through the driver, in the device's primary
// context (pushed for the call, so the caller's current context is left as it was).
#pragma once

#include <cstddef>
#include <memory>

#include "support/status.hpp"

namespace convjit::runtime::cuda {

Expected<std::shared_ptr<void>> allocate(int ordinal, std::size_t bytes);
Status copy_to_device(int ordinal, void* destination, const void* source, std::size_t bytes);
Status copy_from_device(int ordinal, void* destination, const void* source, std::size_t bytes);
Status synchronize(int ordinal, void* stream);
/// A new stream of the device (non-blocking with respect to the default stream when
/// `non_blocking`), and its release; for programs that need their own streams (tests, tools).
Expected<void*> create_stream(int ordinal, bool non_blocking);
Status destroy_stream(int ordinal, void* stream);

}  // namespace convjit::runtime::cuda
