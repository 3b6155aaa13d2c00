// The interpret mode's host build: a generated kernel body, after the host prelude, compiled by
// the system's C++ compiler ($CXX, else c++, g++ or clang++ on the PATH) into a shared object
// that is loaded with dlopen. Objects are cached in memory by the hash of their source and the
// compiler, and their bytes go to the disk cache as an artifact, so a later process loads them
// without compiling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cuda/interpret/block_runner.hpp"
#include "support/status.hpp"

namespace convjit::runtime::interpret {

/// The host C++ compiler and the flags kernels are built with.
struct HostCompiler {
  std::vector<std::string> command;  // the compiler and any leading arguments from $CXX
  std::string identity;              // first line of `--version`
  std::vector<std::string> flags;
  /// "g++ (Debian 12.2.0-14) 12.2.0 -std=c++17 -O1 ...": part of the cache key.
  std::string key() const;
};

/// The compiler, found once per process; Unavailable saying what was tried when none runs.
Expected<const HostCompiler*> host_compiler();

/// The full host translation unit of a kernel body: the ABI header and host prelude, then
/// `#line 1 "<name>.cu"` and the body (so reported lines are lines of the body).
std::string host_translation_unit(std::string_view body, std::string_view name);

class HostObject {
 public:
  ~HostObject();
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;

  /// Builds (or finds in the memory cache) the object of `body`. A compile error is Internal
  /// with the compiler's output.
  static Expected<std::shared_ptr<const HostObject>> build(std::string_view body,
                                                           std::string_view name);
  /// Loads an object from its bytes (a disk-cache artifact).
  static Expected<std::shared_ptr<const HostObject>> load(const std::vector<std::uint8_t>& bytes);

  /// The extern "C" kernel `symbol`, or NotFound.
  Expected<KernelEntry> kernel(const std::string& symbol) const;
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  HostObject() = default;
  static Expected<std::shared_ptr<const HostObject>> open(const std::string& path,
                                                          std::vector<std::uint8_t> bytes);
  void* handle_ = nullptr;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace convjit::runtime::interpret
