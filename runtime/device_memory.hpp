// Memory of a device for callers without a framework (convjit::DeviceBuffer): the CUDA driver's
// for a GPU, aligned host memory for the CPU and the CUDA interpret mode.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/backend_registry.hpp"
#include "support/status.hpp"

namespace convjit::runtime {

/// `bytes` on `device`, freed when the last owner lets go.
Expected<std::shared_ptr<void>> allocate_device_memory(const Device& device, std::size_t bytes);
Status copy_to_device_memory(const Device& device, void* destination, const void* source,
                             std::size_t bytes);
Status copy_from_device_memory(const Device& device, void* destination, const void* source,
                               std::size_t bytes);
Status synchronize_device(const Device& device, void* stream);

}  // namespace convjit::runtime
