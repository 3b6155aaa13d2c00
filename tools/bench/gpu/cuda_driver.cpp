#include "tools/bench/gpu/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <stdexcept>

namespace convjit::bench::gpu {
namespace {

// The driver's C types, declared here so that the benchmark needs no CUDA header to build.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's type
using Handle = void*;

constexpr int kAttrClockRate = 13;  // CU_DEVICE_ATTRIBUTE_*, from cuda.h
constexpr int kAttrSmCount = 16;
constexpr int kAttrMemoryClockRate = 36;
constexpr int kAttrBusWidth = 37;
constexpr int kAttrMajor = 75;
constexpr int kAttrMinor = 76;

}  // namespace

struct CudaDriver::Api {
  void* library = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(Handle*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(Handle) = nullptr;
  CUresult (*mem_get_info)(std::size_t*, std::size_t*) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*stream_create)(Handle*, unsigned) = nullptr;
  CUresult (*stream_destroy)(Handle) = nullptr;
  CUresult (*stream_synchronize)(Handle) = nullptr;
  CUresult (*event_create)(Handle*, unsigned) = nullptr;
  CUresult (*event_destroy)(Handle) = nullptr;
  CUresult (*event_record)(Handle, Handle) = nullptr;
  CUresult (*event_synchronize)(Handle) = nullptr;
  CUresult (*event_elapsed_time)(float*, Handle, Handle) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;

  template <typename Fn>
  void find(Fn* out, const char* symbol) {
    *out = reinterpret_cast<Fn>(::dlsym(library, symbol));  // NOLINT: the driver's signatures
    if (*out == nullptr) {
      throw std::runtime_error(fmt::format("no CUDA device: libcuda.so.1 has no {}", symbol));
    }
  }
};

CudaDriver::CudaDriver(int ordinal) : api_(new Api()) {
  Api& a = *api_;
  a.library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (a.library == nullptr) {
    const char* why = ::dlerror();
    delete api_;
    api_ = nullptr;
    throw std::runtime_error(
        fmt::format("no CUDA device: the CUDA driver (libcuda.so.1) is not "
                    "installed or not on the loader's path ({})",
                    why != nullptr ? why : "dlopen failed"));
  }
  try {
    a.find(&a.init, "cuInit");
    a.find(&a.device_get_count, "cuDeviceGetCount");
    a.find(&a.device_get, "cuDeviceGet");
    a.find(&a.device_get_name, "cuDeviceGetName");
    a.find(&a.device_get_attribute, "cuDeviceGetAttribute");
    a.find(&a.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    a.find(&a.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
    a.find(&a.ctx_set_current, "cuCtxSetCurrent");
    a.find(&a.mem_get_info, "cuMemGetInfo_v2");
    a.find(&a.mem_alloc, "cuMemAlloc_v2");
    a.find(&a.mem_free, "cuMemFree_v2");
    a.find(&a.memcpy_htod, "cuMemcpyHtoD_v2");
    a.find(&a.memcpy_dtoh, "cuMemcpyDtoH_v2");
    a.find(&a.stream_create, "cuStreamCreate");
    a.find(&a.stream_destroy, "cuStreamDestroy_v2");
    a.find(&a.stream_synchronize, "cuStreamSynchronize");
    a.find(&a.event_create, "cuEventCreate");
    a.find(&a.event_destroy, "cuEventDestroy_v2");
    a.find(&a.event_record, "cuEventRecord");
    a.find(&a.event_synchronize, "cuEventSynchronize");
    a.find(&a.event_elapsed_time, "cuEventElapsedTime");
    a.find(&a.get_error_string, "cuGetErrorString");
    if (const CUresult r = a.init(0); r != 0) {
      const char* text = nullptr;
      a.get_error_string(r, &text);
      throw std::runtime_error(
          fmt::format("no CUDA device: cuInit failed ({})", text != nullptr ? text : "?"));
    }
    int count = 0;
    check(a.device_get_count(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count) {
      throw std::runtime_error(
          fmt::format("no CUDA device: cuda:{} does not exist (the driver sees {} device{})",
                      ordinal, count, count == 1 ? "" : "s"));
    }
    check(a.device_get(&device_, ordinal), "cuDeviceGet");
    check(a.primary_ctx_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
    check(a.ctx_set_current(context_), "cuCtxSetCurrent");
    check(a.stream_create(&stream_, 0), "cuStreamCreate");
    check(a.event_create(&start_, 0), "cuEventCreate");
    check(a.event_create(&stop_, 0), "cuEventCreate");

    char name[256] = {};
    check(a.device_get_name(name, sizeof name, device_), "cuDeviceGetName");
    facts_.name = name;
    facts_.ordinal = ordinal;
    int v = 0;
    check(a.device_get_attribute(&facts_.sm_major, kAttrMajor, device_), "cuDeviceGetAttribute");
    check(a.device_get_attribute(&facts_.sm_minor, kAttrMinor, device_), "cuDeviceGetAttribute");
    check(a.device_get_attribute(&facts_.sm_count, kAttrSmCount, device_), "cuDeviceGetAttribute");
    check(a.device_get_attribute(&v, kAttrClockRate, device_), "cuDeviceGetAttribute");
    facts_.clock_mhz = v / 1000.0;
    int memory_khz = 0, bus_bits = 0;
    check(a.device_get_attribute(&memory_khz, kAttrMemoryClockRate, device_),
          "cuDeviceGetAttribute");
    check(a.device_get_attribute(&bus_bits, kAttrBusWidth, device_), "cuDeviceGetAttribute");
    facts_.memory_gbps = 2.0 * memory_khz * 1e3 * (bus_bits / 8.0) * 1e-9;
    std::size_t total = 0;
    check(a.mem_get_info(&facts_.free_bytes, &total), "cuMemGetInfo");
  } catch (...) {
    close();
    throw;
  }
}

CudaDriver::~CudaDriver() { close(); }

void CudaDriver::close() {
  if (api_ == nullptr) return;
  Api& a = *api_;
  if (start_ != nullptr) a.event_destroy(start_);
  if (stop_ != nullptr) a.event_destroy(stop_);
  if (stream_ != nullptr) a.stream_destroy(stream_);
  if (context_ != nullptr) a.primary_ctx_release(device_);
  start_ = stop_ = stream_ = context_ = nullptr;
  // The library stays loaded: cuDNN and convjit's own driver handle share it.
  delete api_;
  api_ = nullptr;
}

void CudaDriver::check(int result, const char* what) const {
  if (result == 0) return;
  const char* text = nullptr;
  if (api_->get_error_string != nullptr) api_->get_error_string(result, &text);
  throw std::runtime_error(
      fmt::format("CUDA driver: {} failed: {} ({})", what, text != nullptr ? text : "?", result));
}

void* CudaDriver::allocate(std::size_t bytes) {
  CUdeviceptr p = 0;
  const CUresult r = api_->mem_alloc(&p, bytes);
  if (r != 0) check(r, fmt::format("cuMemAlloc of {} bytes", bytes).c_str());
  return reinterpret_cast<void*>(p);  // NOLINT: a device address
}

void CudaDriver::release(void* pointer) {
  api_->mem_free(reinterpret_cast<CUdeviceptr>(pointer));  // NOLINT: a device address
}

void CudaDriver::copy_to_device(void* device, const void* host, std::size_t bytes) {
  synchronize();
  check(api_->memcpy_htod(reinterpret_cast<CUdeviceptr>(device), host, bytes),  // NOLINT
        "cuMemcpyHtoD");
}

void CudaDriver::copy_to_host(void* host, const void* device, std::size_t bytes) {
  synchronize();
  check(api_->memcpy_dtoh(host, reinterpret_cast<CUdeviceptr>(device), bytes),  // NOLINT
        "cuMemcpyDtoH");
}

void CudaDriver::synchronize() { check(api_->stream_synchronize(stream_), "cuStreamSynchronize"); }

void CudaDriver::record(void* event) { check(api_->event_record(event, stream_), "cuEventRecord"); }

double CudaDriver::elapsed_ms() {
  check(api_->event_synchronize(stop_), "cuEventSynchronize");
  float ms = 0;
  check(api_->event_elapsed_time(&ms, start_, stop_), "cuEventElapsedTime");
  return ms;
}

}  // namespace convjit::bench::gpu
