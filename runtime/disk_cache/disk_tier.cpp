#include "runtime/disk_cache/disk_tier.hpp"

#include <chrono>

#include <fmt/format.h>

#include "frontend/hash.hpp"
#include "runtime/codegen_version.hpp"
#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/jit_observe.hpp"
#include "runtime/disk_cache/make_entry.hpp"

namespace convjit::runtime {
namespace {

void observe(const KernelCache::Entry& kernel, const std::string& key) {
  if (kernel && kernel->code) {
    disk_cache::observe_generated_code(kernel->name, hash128(key).hex(), kernel->code->code_bytes());
  }
}

// The kernel of a verified entry, from its stored artifacts: no planning, lowering,
// scheduling or code generation. nullptr when the entry holds nothing to load (the
// interpreter compiled it, or its backend cannot reload code): the caller compiles instead.
KernelCache::Entry load_stored(const disk_cache::Entry& stored, const ConvProblem& problem,
                               const codegen::Backend& backend, int num_threads,
                               Status* refused) {
  if (stored.meta.backend != backend.name()) return nullptr;
  codegen::Artifacts artifacts;
  for (const auto& [name, bytes] : stored.artifacts) {
    if (name != disk_cache::kIrArtifact && name != disk_cache::kPlanArtifact) {
      artifacts[name] = bytes;
    }
  }
  if (artifacts.empty()) return nullptr;
  Expected<std::unique_ptr<codegen::CompiledCode>> loaded = backend.load(artifacts);
  if (!loaded) {
    *refused = loaded.status();
    return nullptr;
  }
  if (loaded.value()->name() != stored.meta.kernel_name) {
    *refused = invalid_argument(fmt::format("stored code is kernel {}, its metadata says {}",
                                            loaded.value()->name(), stored.meta.kernel_name));
    return nullptr;
  }
  auto kernel = std::make_shared<CompiledKernel>();
  kernel->problem = problem;
  kernel->backend = std::string(backend.name());
  kernel->device = backend.device();
  kernel->memory_space = backend.memory_space();
  kernel->name = loaded.value()->name();
  kernel->num_threads = num_threads;
  kernel->code = std::shared_ptr<const codegen::CompiledCode>(std::move(loaded).value());
  return kernel;
}

}  // namespace

Expected<KernelCache::Entry> compile_through_disk_cache(const std::string& key,
                                                       const OpDescriptor& desc,
                                                       const ConvProblem& problem,
                                                       const codegen::Backend& backend,
                                                       int num_threads, const BuildFn& build,
                                                       bool* disk_hit) {
  disk_cache::DiskCache* disk =
      problem.is_empty() ? nullptr : disk_cache::DiskCache::process_default();
  return compile_through_disk_cache(disk, key, desc, problem, backend, num_threads, build,
                                    disk_hit);
}

Expected<KernelCache::Entry> compile_through_disk_cache(disk_cache::DiskCache* disk,
                                                       const std::string& key,
                                                       const OpDescriptor& desc,
                                                       const ConvProblem& problem,
                                                       const codegen::Backend& backend,
                                                       int num_threads, const BuildFn& build,
                                                       bool* disk_hit) {
  *disk_hit = false;
  if (problem.is_empty()) disk = nullptr;
  if (disk != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    if (std::optional<disk_cache::Entry> stored = disk->lookup(key)) {
      // Verified entry (key, versions, checksums): map its code. An entry without loadable
      // code is compiled again, as is one the backend refuses (with a warning: that is a bug).
      Status refused;
      KernelCache::Entry kernel = load_stored(*stored, problem, backend, num_threads, &refused);
      if (!refused.is_ok()) {
        disk_cache::warn(fmt::format("disk cache entry {} not loaded ({}); recompiling it",
                                     stored->meta.key_hash.substr(0, 12), refused.message()));
      } else {
        if (!kernel) {
          Expected<KernelCache::Entry> built = build(nullptr);
          if (!built.has_value()) return built;
          kernel = std::make_shared<CompiledKernel>(*built.value());
        }
        *disk_hit = true;
        // Counting the hit rewrites the metadata: off the compiling thread.
        disk->record_hit_in_background(stored->meta);
        observe(kernel, key);
        // The kernel's compile time is what this disk hit cost: lookup, verification and all.
        auto timed = std::make_shared<CompiledKernel>(*kernel);
        timed->compile_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        return KernelCache::Entry(std::move(timed));
      }
    }
  }
  const bool store = disk != nullptr && disk->writable();
  BuildRecord record;
  Expected<KernelCache::Entry> built = build(store ? &record : nullptr);
  if (!built.has_value()) return built;
  observe(built.value(), key);
  const CompiledKernel& kernel = *built.value();
  if (store && kernel.code) {
    const std::string codegen_version(runtime::codegen_version());
    const std::string target = backend.target_name();
    const codegen::Artifacts artifacts =
        kernel.backend == backend.name() ? kernel.code->artifacts() : codegen::Artifacts{};
    disk_cache::CompiledFacts facts;
    facts.descriptor = &desc;
    facts.problem = &problem;
    facts.key = key;
    facts.codegen_version = codegen_version;
    facts.backend = kernel.backend;
    facts.isa = target;
    facts.kernel_name = kernel.name;
    facts.compile_ms = kernel.compile_ms;
    facts.artifacts = &artifacts;
    facts.plan_text = record.plan_text;
    facts.ir_text = record.ir_text;
    // A failed store has already warned once; the kernel is good either way.
    (void)disk->store(disk_cache::make_entry(facts));
  }
  return built;
}

}  // namespace convjit::runtime
