#include "runtime/device_memory.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#ifdef CONVJIT_HAVE_CUDA
#include "runtime/cuda/cuda_memory.hpp"
#endif

namespace convjit::runtime {
namespace {

constexpr std::align_val_t kHostAlignment{64};

bool on_host(const Device& device) { return device.kind != Device::Kind::kCuda; }

#ifndef CONVJIT_HAVE_CUDA
Status no_cuda_support() {
  return unimplemented(
      "convjit was built without CUDA support (-DCONVJIT_CUDA=OFF or no CUDA "
      "toolkit at build time)");
}
#endif

}  // namespace

Expected<std::shared_ptr<void>> allocate_device_memory(const Device& device, std::size_t bytes) {
  if (on_host(device)) {
    void* p = ::operator new(std::max<std::size_t>(bytes, 1), kHostAlignment, std::nothrow);
    if (p == nullptr) {
      return resource_exhausted("cannot allocate " + std::to_string(bytes) +
                                " bytes of host memory");
    }
    return std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, kHostAlignment); });
  }
#ifdef CONVJIT_HAVE_CUDA
  return cuda::allocate(device.ordinal, bytes);
#else
  return no_cuda_support();
#endif
}

Status copy_to_device_memory(const Device& device, void* destination, const void* source,
                             std::size_t bytes) {
  if (on_host(device)) {
    if (bytes > 0) std::memcpy(destination, source, bytes);
    return Status::ok();
  }
#ifdef CONVJIT_HAVE_CUDA
  return cuda::copy_to_device(device.ordinal, destination, source, bytes);
#else
  return no_cuda_support();
#endif
}

Status copy_from_device_memory(const Device& device, void* destination, const void* source,
                               std::size_t bytes) {
  if (on_host(device)) {
    if (bytes > 0) std::memcpy(destination, source, bytes);
    return Status::ok();
  }
#ifdef CONVJIT_HAVE_CUDA
  return cuda::copy_from_device(device.ordinal, destination, source, bytes);
#else
  return no_cuda_support();
#endif
}

Status synchronize_device(const Device& device, void* stream) {
  if (on_host(device)) return Status::ok();
#ifdef CONVJIT_HAVE_CUDA
  return cuda::synchronize(device.ordinal, stream);
#else
  (void)stream;
  return no_cuda_support();
#endif
}

}  // namespace convjit::runtime
