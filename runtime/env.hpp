// The environment variables that tune convjit at run time (DESIGN.md section 6), parsed
// defensively: a bad value gets one warning on stderr and the default.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cpu/cpu_info.hpp"

namespace convjit::runtime {

/// Memory cache entries when CONVJIT_CACHE_CAPACITY is unset.
inline constexpr std::size_t kDefaultCacheCapacity = 512;
/// Resident bytes (code and idle scratch) the memory cache keeps when CONVJIT_CACHE_BYTES is
/// unset: a network's kernels with their scratch fit; hundreds of large ones do not.
inline constexpr std::size_t kDefaultCacheBytes = std::size_t{1} << 30;

/// The settings the environment variables select.
struct EnvConfig {
  /// CONVJIT_VERBOSE: 0 silent, 1 one line per compile and run, 2 also the IR after each pass.
  int verbose = 0;
  /// CONVJIT_CACHE_CAPACITY: kernels the memory cache keeps (0 disables it).
  std::size_t cache_capacity = kDefaultCacheCapacity;
  /// CONVJIT_CACHE_BYTES: resident bytes of the memory cache's kernels (see docs/CACHE.md).
  std::size_t cache_bytes = kDefaultCacheBytes;
  /// CONVJIT_NUM_THREADS: threads a run may use; default all cores.
  int num_threads = 1;
  /// CONVJIT_ISA: the highest instruction set the code generators may use.
  cpu::Isa isa_cap = cpu::Isa::kAvx512;
  /// CONVJIT_BACKEND: the backend compile() picks when the caller names none ("" = best).
  std::string backend;
  /// CONVJIT_CUDA_INTERPRET: device "cuda" runs the CUDA backend's kernels on the host.
  bool cuda_interpret = false;
  /// CONVJIT_ALWAYS_COMPILE: bypass every cache.
  bool always_compile = false;
};

/// Reads a variable; returns nullptr when it is unset (std::getenv in production).
using EnvGetter = std::function<const char*(const char* name)>;

/// "1048576", "64K", "256M", "2G" (binary multiples; case-insensitive suffix) as bytes; false
/// when it is not such a size or does not fit.
bool parse_byte_size(std::string_view text, std::size_t* out);

/// Parses the variables through `get`. Each bad value appends one message to `warnings`
/// and leaves that setting at its default. Exposed so tests need not touch the process
/// environment.
EnvConfig parse_env(const EnvGetter& get, std::vector<std::string>* warnings);

/// The process's settings: parsed from the real environment once, on first use, with the
/// warnings written to stderr.
const EnvConfig& env();

/// Cores of the machine (at least 1).
int hardware_threads();

}  // namespace convjit::runtime
