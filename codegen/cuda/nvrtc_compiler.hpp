// NVRTC, opened at run time (dlopen: the library never links it): CUDA C++ to a cubin for one
// exact architecture, with the PTX kept for newer devices and each kernel's resources (registers,
// spills, shared memory) read from ptxas's report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_device_info.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// What ptxas reports for one kernel.
struct CudaKernelResources {
  std::string symbol;
  int registers = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
  int shared_bytes = 0;
};

/// One NVRTC compile.
struct CudaBinary {
  std::string arch;  // "sm_80"
  std::vector<std::uint8_t> cubin;
  std::string ptx;
  std::string log;
  std::vector<CudaKernelResources> kernels;
  double compile_ms = 0;
};

/// Parses ptxas's -v output ("Compiling entry function 'k' for 'sm_80'", "Used 37 registers,
/// ... 1024 bytes smem", "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads").
std::vector<CudaKernelResources> parse_ptxas_report(std::string_view log);

/// The resources as text ("symbol registers=.. spill_stores=.. spill_loads=.. stack=..
/// smem=..", one kernel per line) and back, for the disk cache and `convjit cache show`.
std::string resources_to_text(const std::vector<CudaKernelResources>& kernels);
std::vector<CudaKernelResources> resources_from_text(std::string_view text);

class NvrtcCompiler {
 public:
  /// The process's NVRTC, loaded on first use: libnvrtc.so.13 / libnvrtc.so.12 / libnvrtc.so
  /// through the loader's path, then under $CUDA_PATH, $CUDA_HOME and /usr/local/cuda.
  /// Unavailable, saying where it looked, when none loads.
  static Expected<const NvrtcCompiler*> get();

  /// "13.0".
  const std::string& version() const { return version_; }
  /// Architectures this NVRTC compiles for (75, 80, 86, ...).
  const std::vector<int>& supported_archs() const { return archs_; }

  /// Compiles `source` (one translation unit, named `name` in diagnostics) for `device`'s exact
  /// architecture. A compile error is Internal (convjit generated it) with NVRTC's log.
  Expected<CudaBinary> compile(const std::string& source, const std::string& name,
                               const CudaDeviceInfo& device) const;

  struct Api;

 private:
  NvrtcCompiler() = default;
  const Api* api_ = nullptr;
  std::string version_;
  std::vector<int> archs_;
};

}  // namespace convjit::codegen
