#include "runtime/compile.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "codegen/interpreter/interpreter_backend.hpp"
#include "ir/printer.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/descriptor_memo.hpp"
#include "runtime/disk_cache/disk_tier.hpp"
#include "runtime/env.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/verbose_log.hpp"

namespace convjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Planning, lowering, scheduling and code generation for one problem: what the cache saves.
// `record` (when not null) receives the plan and scheduled IR as text, printed while compiling.
Expected<KernelCache::Entry> build_kernel(const ConvProblem& problem,
                                          std::shared_ptr<const codegen::Backend> backend,
                                          const codegen::PlanOptions& options,
                                          BuildRecord* record) {
  const Clock::time_point start = Clock::now();
  auto compiled = std::make_shared<CompiledKernel>();
  compiled->problem = problem;
  compiled->num_threads = options.num_threads;
  compiled->device = backend->device();
  compiled->memory_space = backend->memory_space();
  if (problem.is_empty() && backend->device() == "cpu") {
    // Some operand has no elements: the result is zeros, which needs no generated code on the
    // CPU. A CUDA device (its interpret mode too) runs its backend's own zero fill.
    compiled->backend = std::string(backend->name());
    compiled->name = "zero_fill";
    compiled->compile_ms = ms_since(start);
    return KernelCache::Entry(std::move(compiled));
  }

  auto trace_for = [&](const codegen::Backend& b) {
    codegen::CompileTrace trace;
    if (verbose_level() >= 2) {
      trace.plan_observer = [&b](std::string_view plan) {
        log_info(2, fmt::format("{} plan: {}", b.name(), plan));
      };
      trace.observer = [&b](std::string_view pass, const ir::LoopNest& nest) {
        log_ir(fmt::format("{},{}", b.name(), pass), ir::print(nest));
      };
    }
    if (record != nullptr) {
      trace.plan_text = &record->plan_text;
      trace.ir_text = &record->ir_text;
    }
    return trace;
  };
  Expected<std::unique_ptr<codegen::CompiledCode>> code =
      codegen::compile(*backend, problem, options, trace_for(*backend));
  // A host backend that cannot take the problem leaves it to the interpreter, which runs
  // every nest; a device backend's refusal is the caller's error (its tensors are on the
  // device, out of the interpreter's reach).
  if (!code.has_value() && code.status().code() == StatusCode::kUnimplemented &&
      backend->memory_space() == codegen::MemorySpace::kHost &&
      backend->name() != codegen::kInterpreterBackendName) {
    log_info(1, fmt::format("backend {} does not support this problem ({}); using the "
                            "interpreter: \"{}\"",
                            backend->name(), code.status().message(), to_text(problem)));
    backend = interpreter_backend();
    code = codegen::compile(*backend, problem, options, trace_for(*backend));
  }
  if (!code.has_value()) return code.status();
  compiled->backend = std::string(backend->name());
  compiled->name = code.value()->name();
  compiled->code = std::shared_ptr<const codegen::CompiledCode>(std::move(code).value());
  compiled->compile_ms = ms_since(start);
  return KernelCache::Entry(std::move(compiled));
}

// The backend for `options` on this process's settings: the caller's device and backend, else
// CONVJIT_BACKEND where it serves the device, else the device's best.
Expected<std::shared_ptr<const codegen::Backend>> choose_backend(const CompileOptions& options,
                                                                 const EnvConfig& config) {
  Expected<Device> device = parse_device(options.device, config.cuda_interpret);
  if (!device.has_value()) return device.status();
  std::string name = options.backend;
  if (name.empty() && !config.backend.empty() && device->kind == Device::Kind::kCpu) {
    name = config.backend;
  }
  return get_backend(device.value(), name, config.isa_cap);
}

// The process's memory cache, wired on first use to drop the descriptor memo's references to
// the kernels it lets go (eviction, clear): an evicted kernel must really be freed.
KernelCache& memory_cache() {
  static KernelCache& cache = []() -> KernelCache& {
    KernelCache& c = global_kernel_cache();
    c.set_eviction_listener(
        [](std::uint64_t epoch) { global_descriptor_memo().forget_older_than(epoch); });
    return c;
  }();
  return cache;
}

// The full path: validation, backend, canonical key, memory cache (and disk cache, and code
// generation). `memo_key` is the request's descriptor-memo key, empty when the memo is not used.
Expected<std::shared_ptr<const detail::KernelImpl>> compile_slow(const OpDescriptor& desc,
                                                                 const CompileOptions& options,
                                                                 std::string_view memo_key) {
  const Clock::time_point start = Clock::now();
  Expected<ConvProblem> problem = validate(desc);
  if (!problem.has_value()) return problem.status();

  if (options.num_threads < 0) {
    return invalid_argument(
        fmt::format("CompileOptions::num_threads must be >= 0, but got {}", options.num_threads));
  }
  const EnvConfig& config = env();
  Expected<std::shared_ptr<const codegen::Backend>> backend = choose_backend(options, config);
  if (!backend.has_value()) return backend.status();
  codegen::PlanOptions plan_options;
  plan_options.num_threads = options.num_threads > 0 ? options.num_threads : config.num_threads;
  plan_options.math_mode = options.math_mode;
  plan_options.deterministic = options.deterministic;

  auto build = [&](BuildRecord* record) {
    return build_kernel(problem.value(), backend.value(), plan_options, record);
  };
  KernelCache::Entry entry;
  std::string_view log_source = "miss";
  std::string cache_source = "none";
  std::string descriptor_text = to_text(desc);
  if (options.always_compile || config.always_compile) {
    Expected<KernelCache::Entry> built = build(nullptr);
    if (!built.has_value()) return built.status();
    entry = std::move(built).value();
  } else {
    const std::string key = make_cache_key(problem.value(), *backend.value(), plan_options);
    // On a memory miss the disk cache is asked before code is generated.
    bool disk_hit = false;
    auto build_or_load = [&]() {
      return compile_through_disk_cache(key, desc, problem.value(), *backend.value(),
                                        plan_options.num_threads, build, &disk_hit);
    };
    KernelCache& cache = memory_cache();
    // Read before the lookup: see KernelCache::epoch.
    const std::uint64_t epoch_before = cache.epoch();
    Expected<KernelCache::Result> result = cache.get_or_compile(key, build_or_load);
    if (!result.has_value()) return result.status();
    entry = std::move(result.value().kernel);
    if (result.value().source != KernelCache::Source::kCompiled) {
      log_source = "memory_hit";
      cache_source = "memory";
    } else if (disk_hit) {
      log_source = "disk_hit";
      cache_source = "disk";
    }
    if (!memo_key.empty()) {
      // What every later compile() of this request returns: the same handle state a memory
      // hit gets. The caller's parallel_for is not part of it; a hit with one copies the rest.
      auto memo_kernel = std::make_shared<const detail::KernelImpl>(entry, desc.op,
                                                                    descriptor_text, "memory",
                                                                    ParallelFor{});
      // The memo may hold about two entries per cached kernel: requests that differ only in
      // how they name the same problem (a thread count given or defaulted, ...) share one.
      DescriptorMemo& memo = global_descriptor_memo();
      memo.remember(memo_key, std::move(memo_kernel), epoch_before, cache.epoch(),
                    2 * cache.capacity());
      // A kernel that left the cache while this entry was being recorded, after the cache's
      // listener had cleaned the memo, would stay alive in it: look once more.
      if (const std::uint64_t now = cache.epoch(); now != epoch_before) {
        memo.forget_older_than(now);
      }
    }
  }

  auto kernel = std::make_shared<const detail::KernelImpl>(
      std::move(entry), desc.op, std::move(descriptor_text), std::move(cache_source),
      options.parallel_for);
  log_compile(*kernel, log_source, ms_since(start));
  return std::shared_ptr<const detail::KernelImpl>(std::move(kernel));
}

}  // namespace

Expected<std::shared_ptr<const detail::KernelImpl>> compile_kernel(const OpDescriptor& desc,
                                                                   const CompileOptions& options) {
  const EnvConfig& config = env();
  // Requests that bypass the caches, or that are errors (left to the slow path to report in its
  // usual order), never use the memo.
  if (options.always_compile || config.always_compile || options.num_threads < 0) {
    return compile_slow(desc, options, {});
  }

  // The fast path: a request seen before, while nothing has left the memory cache since.
  const bool verbose = verbose_level() >= 1;
  const Clock::time_point start = verbose ? Clock::now() : Clock::time_point{};
  const int num_threads = options.num_threads > 0 ? options.num_threads : config.num_threads;
  // One buffer per thread: after its first use, a key costs no allocation.
  thread_local std::string memo_key;
  make_descriptor_key(desc, options, num_threads, config.isa_cap, &memo_key);

  KernelCache& cache = memory_cache();
  std::shared_ptr<const detail::KernelImpl> kernel =
      global_descriptor_memo().find(memo_key, cache.epoch());
  if (kernel == nullptr) {
    // Copied, so the key stays intact should anything on the slow path compile on this thread.
    return compile_slow(desc, options, std::string(memo_key));
  }
  cache.count_front_hit();
  kernel->compiled().use_mark.mark();
  if (options.parallel_for) {
    kernel = std::make_shared<const detail::KernelImpl>(kernel->compiled_ptr(), kernel->op(),
                                                        kernel->descriptor(), "memory",
                                                        options.parallel_for);
  }
  if (verbose) log_compile(*kernel, "memory_hit", ms_since(start));
  return kernel;
}

}  // namespace convjit::runtime
