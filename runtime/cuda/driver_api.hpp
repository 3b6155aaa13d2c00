// The CUDA driver API, opened at run time: dlopen("libcuda.so.1") and cuGetProcAddress, so the
// library never links libcuda and loads on machines without a GPU or driver. Only runtime/cuda
// includes this header (it needs the toolkit's cuda.h for the types).
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

#include "support/status.hpp"

namespace convjit::runtime::cuda {

struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_get_attribute = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  int driver_version = 0;  // e.g. 12040

  /// A Status for a failed call: `what` plus the driver's name and text for `result`.
  Status error(CUresult result, std::string_view what) const;
};

/// The driver, loaded and initialised once per process. Unavailable "no CUDA device: <reason>"
/// when libcuda cannot be loaded, lacks a function, or cuInit fails (no GPU, driver mismatch).
Expected<const DriverApi*> driver_api();

/// Status "no CUDA device: <reason>" (kind Unavailable).
Status no_cuda_device(std::string_view reason);

/// Makes the primary context of a device current for a scope (push / pop), so convjit leaves the
/// caller's current context as it found it.
class ScopedContext {
 public:
  ScopedContext(const DriverApi& api, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const { return status_; }

 private:
  const DriverApi& api_;
  bool pushed_ = false;
  Status status_;
};

}  // namespace convjit::runtime::cuda
