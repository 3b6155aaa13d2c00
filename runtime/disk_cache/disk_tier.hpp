// The disk cache's place in the compile path: between a memory miss and code generation.
#pragma once

#include <functional>
#include <string>

#include "codegen/backend.hpp"
#include "convjit/types.hpp"
#include "frontend/problem.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/status.hpp"

namespace convjit::disk_cache {
class DiskCache;
}  // namespace convjit::disk_cache

namespace convjit::runtime {

/// What a build leaves for the disk cache beside the kernel: printed once, while compiling.
struct BuildRecord {
  std::string plan_text;
  std::string ir_text;
};

/// Builds the kernel on a miss; fills `record` when it is not null (the disk cache stores it).
using BuildFn = std::function<Expected<KernelCache::Entry>(BuildRecord* record)>;

/// What the memory cache runs on a miss when the disk cache is on: look `key` up on disk; on a
/// verified hit, load the stored code through Backend::load() (no lowering, scheduling or code
/// generation; entries without loadable code are built again) and record the hit; on a miss,
/// `build` (once: the plan and IR it prints while compiling are what the entry stores) and
/// store the result with its artifacts. Sets *disk_hit accordingly. Every kernel built also goes to CONVJIT_JIT_DUMP and
/// CONVJIT_JIT_PROFILE. Without a usable disk cache this is just `build`.
Expected<KernelCache::Entry> compile_through_disk_cache(const std::string& key,
                                                       const OpDescriptor& desc,
                                                       const ConvProblem& problem,
                                                       const codegen::Backend& backend,
                                                       int num_threads, const BuildFn& build,
                                                       bool* disk_hit);

/// The same with an explicit cache (nullptr: no disk cache), which tests open on a temp
/// directory; the overload above passes DiskCache::process_default().
Expected<KernelCache::Entry> compile_through_disk_cache(disk_cache::DiskCache* disk,
                                                       const std::string& key,
                                                       const OpDescriptor& desc,
                                                       const ConvProblem& problem,
                                                       const codegen::Backend& backend,
                                                       int num_threads, const BuildFn& build,
                                                       bool* disk_hit);

}  // namespace convjit::runtime
