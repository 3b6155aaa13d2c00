#include "runtime/cuda/driver_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace convjit::runtime::cuda {
namespace {

// Entry points are asked for as of this CUDA version (cuGetProcAddress then returns e.g.
// cuMemAlloc_v2); drivers since 12.0 know it.
constexpr int kRequestedCudaVersion = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct Loader {
  void* handle = nullptr;
  GetProcAddress get_proc = nullptr;
  GetProcAddressV1 get_proc_v1 = nullptr;

  // `name` through cuGetProcAddress, else the versioned symbol itself.
  template <typename F>
  bool bind(const char* name, const char* versioned, F* out) {
    void* p = nullptr;
    if (get_proc != nullptr) {
      CUdriverProcAddressQueryResult found{};
      if (get_proc(name, &p, kRequestedCudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
          CUDA_SUCCESS) {
        p = nullptr;
      }
    } else if (get_proc_v1 != nullptr) {
      if (get_proc_v1(name, &p, kRequestedCudaVersion, CU_GET_PROC_ADDRESS_DEFAULT) !=
          CUDA_SUCCESS) {
        p = nullptr;
      }
    }
    if (p == nullptr) p = ::dlsym(handle, versioned);
    *out = reinterpret_cast<F>(p);
    return p != nullptr;
  }
};

}  // namespace

Status no_cuda_device(std::string_view reason) {
  return {StatusCode::kUnavailable, fmt::format("no CUDA device: {}", reason)};
}

Status DriverApi::error(CUresult result, std::string_view what) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name == nullptr || get_error_name(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (get_error_string == nullptr || get_error_string(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  const std::string detail =
      fmt::format("{} ({})", text != nullptr ? text : "unknown error",
                  name != nullptr ? name : fmt::format("CUresult {}", static_cast<int>(result)));
  StatusCode code = StatusCode::kInternal;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      code = StatusCode::kResourceExhausted;
      break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      code = StatusCode::kInvalidArgument;
      break;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
      code = StatusCode::kUnavailable;
      break;
    default:
      break;
  }
  return {code, fmt::format("CUDA driver: {}: {}", what, detail)};
}

Expected<const DriverApi*> driver_api() {
  static std::once_flag once;
  static DriverApi* api = nullptr;
  static Status failure;
  std::call_once(once, [] {
    Loader loader;
    loader.handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (loader.handle == nullptr) {
      const char* error = ::dlerror();
      failure =
          no_cuda_device(fmt::format("the NVIDIA driver library libcuda.so.1 is not "
                                     "installed or not on the loader's path ({})",
                                     error != nullptr ? error : "dlopen failed"));
      return;
    }
    loader.get_proc =
        reinterpret_cast<GetProcAddress>(::dlsym(loader.handle, "cuGetProcAddress_v2"));
    if (loader.get_proc == nullptr) {
      loader.get_proc_v1 =
          reinterpret_cast<GetProcAddressV1>(::dlsym(loader.handle, "cuGetProcAddress"));
    }
    auto* a = new DriverApi();  // lives for the process, as the driver does
    const bool ok =
        loader.bind("cuInit", "cuInit", &a->init) &&
        loader.bind("cuDriverGetVersion", "cuDriverGetVersion", &a->driver_get_version) &&
        loader.bind("cuGetErrorName", "cuGetErrorName", &a->get_error_name) &&
        loader.bind("cuGetErrorString", "cuGetErrorString", &a->get_error_string) &&
        loader.bind("cuDeviceGetCount", "cuDeviceGetCount", &a->device_get_count) &&
        loader.bind("cuDeviceGet", "cuDeviceGet", &a->device_get) &&
        loader.bind("cuDeviceGetName", "cuDeviceGetName", &a->device_get_name) &&
        loader.bind("cuDeviceGetAttribute", "cuDeviceGetAttribute", &a->device_get_attribute) &&
        loader.bind("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain",
                    &a->primary_ctx_retain) &&
        loader.bind("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",
                    &a->primary_ctx_release) &&
        loader.bind("cuCtxPushCurrent", "cuCtxPushCurrent_v2", &a->ctx_push_current) &&
        loader.bind("cuCtxPopCurrent", "cuCtxPopCurrent_v2", &a->ctx_pop_current) &&
        loader.bind("cuModuleLoadData", "cuModuleLoadData", &a->module_load_data) &&
        loader.bind("cuModuleUnload", "cuModuleUnload", &a->module_unload) &&
        loader.bind("cuModuleGetFunction", "cuModuleGetFunction", &a->module_get_function) &&
        loader.bind("cuLaunchKernel", "cuLaunchKernel", &a->launch_kernel) &&
        loader.bind("cuMemAlloc", "cuMemAlloc_v2", &a->mem_alloc) &&
        loader.bind("cuMemFree", "cuMemFree_v2", &a->mem_free) &&
        loader.bind("cuMemcpyHtoD", "cuMemcpyHtoD_v2", &a->memcpy_htod) &&
        loader.bind("cuMemcpyDtoH", "cuMemcpyDtoH_v2", &a->memcpy_dtoh) &&
        loader.bind("cuPointerGetAttribute", "cuPointerGetAttribute", &a->pointer_get_attribute) &&
        loader.bind("cuStreamSynchronize", "cuStreamSynchronize", &a->stream_synchronize) &&
        loader.bind("cuStreamCreate", "cuStreamCreate", &a->stream_create) &&
        loader.bind("cuStreamDestroy", "cuStreamDestroy_v2", &a->stream_destroy) &&
        loader.bind("cuMemGetInfo", "cuMemGetInfo_v2", &a->mem_get_info) &&
        loader.bind("cuCtxSynchronize", "cuCtxSynchronize", &a->ctx_synchronize);
    if (!ok) {
      failure = no_cuda_device(
          "the installed NVIDIA driver lacks functions convjit needs (a "
          "driver older than CUDA 12?)");
      delete a;
      return;
    }
    const CUresult init = a->init(0);
    if (init != CUDA_SUCCESS) {
      failure = no_cuda_device(a->error(init, "cuInit").message());
      delete a;
      return;
    }
    a->driver_get_version(&a->driver_version);
    api = a;
  });
  if (api == nullptr) return failure;
  return static_cast<const DriverApi*>(api);
}

ScopedContext::ScopedContext(const DriverApi& api, CUcontext context) : api_(api) {
  const CUresult r = api_.ctx_push_current(context);
  if (r != CUDA_SUCCESS) {
    status_ = api_.error(r, "cuCtxPushCurrent");
  } else {
    pushed_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    (void)api_.ctx_pop_current(&popped);
  }
}

}  // namespace convjit::runtime::cuda
