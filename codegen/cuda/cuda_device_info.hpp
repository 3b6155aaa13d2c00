// What the CUDA backend's plan needs to know about a GPU: its architecture and the resources
// that bound a CTA (SM count, shared memory, registers). Read from the driver for a real device;
// for compile-only targets (`convjit compile --target sm_90`) and the interpreter, taken from a
// table of known architectures.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "support/status.hpp"

namespace convjit::codegen {

struct CudaDeviceInfo {
  /// Compute capability as major * 10 + minor: 80 for sm_80.
  int arch = 80;
  /// The architecture-specific feature set ("sm_90a"): wgmma and TMA on sm_90.
  bool arch_specific = false;
  /// Marketing name for logs ("NVIDIA H100 80GB HBM3", or "sm_90 (table)").
  std::string name;
  int sm_count = 108;
  /// Static shared memory a block may declare without opting in (48 KiB on every arch).
  int shared_bytes_per_block = 48 * 1024;
  /// Shared memory a block may use after opting in (cudaFuncAttributeMaxDynamicSharedMemorySize).
  int shared_bytes_per_block_optin = 163 * 1024;
  int shared_bytes_per_sm = 164 * 1024;
  int registers_per_sm = 64 * 1024;
  int max_registers_per_thread = 255;
  int max_threads_per_sm = 2048;
  int max_threads_per_block = 1024;

  /// "sm_80", "sm_90a": the NVRTC --gpu-architecture value and the cache's target.
  std::string arch_name() const;
  /// mma.sync with f16/bf16/tf32/f64 operands (sm_80 and later).
  bool has_sm80_mma() const { return arch >= 80; }
};

/// The table entry for an architecture name ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90",
/// "sm_90a", "sm_100", "sm_120", ...); InvalidArgument listing the known names otherwise.
Expected<CudaDeviceInfo> known_cuda_target(std::string_view arch_name);

/// Every architecture name known_cuda_target() accepts.
std::vector<std::string> known_cuda_target_names();

/// Whether `name` looks like a CUDA architecture ("sm_" followed by digits, optional 'a').
bool is_cuda_arch_name(std::string_view name);

}  // namespace convjit::codegen
