// The CUDA driver as the GPU benchmark needs it (device facts, memory, a stream, events),
// opened at run time like the library opens it: `convjit-bench` links no CUDA library and
// builds and runs on machines without one, where `--device cuda` fails with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace convjit::bench::gpu {

/// What the benchmark reports about the device and divides by.
struct DeviceFacts {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int ordinal = 0;   // N of cuda:N
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  double clock_mhz = 0;    // the driver's maximum SM clock
  double memory_gbps = 0;  // 2 x memory clock x bus width (the DRAM's peak)
  std::size_t free_bytes = 0;
};

/// The driver, the device's primary context current on the calling thread, and one stream.
/// Every method throws std::runtime_error with the driver's own text on failure.
class CudaDriver {
 public:
  /// Opens libcuda.so.1 and device `ordinal`; throws std::runtime_error "no CUDA device: ..."
  /// when the library, a driver or the device is missing.
  explicit CudaDriver(int ordinal);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  const DeviceFacts& facts() const { return facts_; }
  /// The benchmark's stream (a CUstream), for convjit's RunContext and cuDNN.
  void* stream() const { return stream_; }

  void* allocate(std::size_t bytes);
  void release(void* pointer);
  void copy_to_device(void* device, const void* host, std::size_t bytes);
  void copy_to_host(void* host, const void* device, std::size_t bytes);
  void synchronize();

  /// Milliseconds per call of `run` over `calls` calls, timed with events on the stream
  /// (the calls queue on it back to back).
  template <typename F>
  double time_calls(int calls, F&& run) {
    record(start_);
    for (int i = 0; i < calls; ++i) run();
    record(stop_);
    return elapsed_ms() / calls;
  }

 private:
  struct Api;
  /// Releases what the constructor acquired (also when it failed half way).
  void close();
  void record(void* event);
  double elapsed_ms();
  void check(int result, const char* what) const;

  Api* api_ = nullptr;
  int device_ = 0;
  void* context_ = nullptr;
  void* stream_ = nullptr;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  DeviceFacts facts_;
};

/// A device allocation released when it goes out of scope.
class DeviceMemory {
 public:
  DeviceMemory(CudaDriver& driver, std::size_t bytes)
      : driver_(&driver), pointer_(bytes > 0 ? driver.allocate(bytes) : nullptr), bytes_(bytes) {}
  ~DeviceMemory() {
    if (pointer_ != nullptr) driver_->release(pointer_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* data() const { return pointer_; }
  std::size_t bytes() const { return bytes_; }

 private:
  CudaDriver* driver_;
  void* pointer_;
  std::size_t bytes_;
};

}  // namespace convjit::bench::gpu
