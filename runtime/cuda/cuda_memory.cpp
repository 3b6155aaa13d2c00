#include "runtime/cuda/cuda_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "runtime/cuda/driver_api.hpp"

namespace convjit::runtime::cuda {
namespace {

struct Primary {
  const DriverApi* api = nullptr;
  CUcontext context = nullptr;
};

// The primary context of `ordinal`, retained once for the process.
Expected<Primary> primary(int ordinal) {
  static std::mutex mutex;
  static std::map<int, CUcontext> contexts;  // guarded by mutex
  Expected<const DriverApi*> api = driver_api();
  if (!api) return api.status();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = contexts.find(ordinal); it != contexts.end()) return Primary{*api, it->second};
  int count = 0;
  CUresult r = (*api)->device_get_count(&count);
  if (r != CUDA_SUCCESS) return no_cuda_device((*api)->error(r, "cuDeviceGetCount").message());
  if (ordinal >= count) {
    return no_cuda_device(fmt::format("cuda:{} asked for, but the driver reports {} device{}",
                                      ordinal, count, count == 1 ? "" : "s"));
  }
  CUdevice device = 0;
  r = (*api)->device_get(&device, ordinal);
  if (r != CUDA_SUCCESS) return (*api)->error(r, "cuDeviceGet");
  CUcontext context = nullptr;
  r = (*api)->primary_ctx_retain(&context, device);
  if (r != CUDA_SUCCESS) return (*api)->error(r, "cuDevicePrimaryCtxRetain");
  contexts[ordinal] = context;
  return Primary{*api, context};
}

}  // namespace

Expected<std::shared_ptr<void>> allocate(int ordinal, std::size_t bytes) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  CUdeviceptr memory = 0;
  const CUresult r = p->api->mem_alloc(&memory, std::max<std::size_t>(bytes, 1));
  if (r != CUDA_SUCCESS) {
    return p->api->error(r, fmt::format("allocating {} bytes on cuda:{}", bytes, ordinal));
  }
  const Primary owner = *p;
  return std::shared_ptr<void>(reinterpret_cast<void*>(memory), [owner](void* q) {
    ScopedContext scope(*owner.api, owner.context);
    (void)owner.api->mem_free(reinterpret_cast<CUdeviceptr>(q));
  });
}

Status copy_to_device(int ordinal, void* destination, const void* source, std::size_t bytes) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  if (bytes == 0) return Status::ok();
  const CUresult r = p->api->memcpy_htod(reinterpret_cast<CUdeviceptr>(destination), source, bytes);
  return r == CUDA_SUCCESS ? Status::ok() : p->api->error(r, "copying to the device");
}

Status copy_from_device(int ordinal, void* destination, const void* source, std::size_t bytes) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  if (bytes == 0) return Status::ok();
  const CUresult r = p->api->memcpy_dtoh(destination, reinterpret_cast<CUdeviceptr>(source), bytes);
  return r == CUDA_SUCCESS ? Status::ok() : p->api->error(r, "copying from the device");
}

Status synchronize(int ordinal, void* stream) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  const CUresult r = p->api->stream_synchronize(static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status::ok() : p->api->error(r, "synchronizing the stream");
}

Expected<void*> create_stream(int ordinal, bool non_blocking) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  CUstream stream = nullptr;
  const CUresult r =
      p->api->stream_create(&stream, non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT);
  if (r != CUDA_SUCCESS) return p->api->error(r, "creating a stream");
  return static_cast<void*>(stream);
}

Status destroy_stream(int ordinal, void* stream) {
  Expected<Primary> p = primary(ordinal);
  if (!p) return p.status();
  ScopedContext scope(*p->api, p->context);
  CONVJIT_RETURN_IF_ERROR(scope.status());
  const CUresult r = p->api->stream_destroy(static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status::ok() : p->api->error(r, "destroying a stream");
}

}  // namespace convjit::runtime::cuda
