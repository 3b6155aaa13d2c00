// Runs hand-written CUDA C++ (written against convjit's portable layer, like the generated
// kernels) in the interpret mode, for tests of the warp-level operations and of the
// interpreter's checks. The same source compiles with NVRTC (cuda_source_compiles).
#pragma once

#ifdef CONVJIT_HAVE_CUDA

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/status.hpp"

namespace convjit::testing {

struct RawLaunch {
  std::string symbol;
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::array<std::uint32_t, 3> block{32, 1, 1};
};

/// Host buffers bound to cj_args: x and w are inputs (read-only to the kernel), y the output.
struct RawBuffers {
  std::vector<std::uint8_t> x, w, y;
  std::size_t workspace_bytes = 0;
};

/// Builds `body` for the host and runs `launches` in order. The interpreter's first report
/// (bounds, race, uninitialised read, divergence) comes back as the error.
Status run_cuda_source(const std::string& name, const std::string& body,
                       const std::vector<RawLaunch>& launches, RawBuffers* buffers,
                       int host_threads = 1);

/// The same on CUDA device 0: NVRTC compiles `body` for the device, buffers are copied to device
/// memory and y back. Unavailable ("no CUDA device: ...") without a GPU.
Status run_cuda_source_on_gpu(const std::string& name, const std::string& body,
                              const std::vector<RawLaunch>& launches, RawBuffers* buffers);

/// NVRTC compiles `body` for `arch`; returns NVRTC's error, if any.
Status cuda_source_compiles(const std::string& name, const std::string& body,
                            const std::string& arch);

template <typename T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> values_of(const std::vector<std::uint8_t>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
