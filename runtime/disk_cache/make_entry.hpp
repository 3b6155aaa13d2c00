// Builds a disk cache entry from what the compile path has in hand after compiling a kernel.
#pragma once

#include <cstdint>
#include <map>
#include <vector>
#include <string>
#include <string_view>

#include "convjit/types.hpp"
#include "frontend/problem.hpp"
#include "runtime/disk_cache/entry.hpp"

namespace convjit::disk_cache {

/// The facts of one compilation.
struct CompiledFacts {
  const OpDescriptor* descriptor = nullptr;
  const ConvProblem* problem = nullptr;
  std::string_view key;              // the full cache key text
  std::string_view codegen_version;
  std::string_view backend;          // Backend::name()
  std::string_view isa;              // Target::name()
  std::string_view kernel_name;
  double compile_ms = 0;
  /// CompiledCode::artifacts(): what Backend::load() rebuilds the code from (empty: the
  /// backend cannot reload its code, and a hit compiles again).
  const std::map<std::string, std::vector<std::uint8_t>>* artifacts = nullptr;
  std::string_view plan_text;        // Plan::describe()
  std::string_view ir_text;          // the scheduled IR, printed
};

/// An entry ready for DiskCache::store.
Entry make_entry(const CompiledFacts& facts);

/// A one-line shape summary for listings, e.g. "N8 56x56x64 k3x3 oc128 s2x2 d1x1".
std::string shape_summary(const ConvProblem& problem);

}  // namespace convjit::disk_cache
