// The x86 backend: checks a nest, generates its functions into read-write memory, copies them
// into pages that become read+execute (never writable and executable at once), and runs them
// with the caller's tensors and per-run scratch. load() does the same with code a previous
// process generated and the disk cache verified.
#include "codegen/x86/x86_backend.hpp"

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "codegen/x86/access_info.hpp"
#include "codegen/x86/emitter.hpp"
#include "codegen/x86/executable_memory.hpp"
#include "codegen/x86/kernel_layout.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "codegen/x86/finite_filter_dispatch.hpp"
#include "ir/lower.hpp"

namespace convjit::codegen {
namespace {

using GeneratedFn = void (*)(void* const* buffers, std::int64_t begin, std::int64_t end);

constexpr std::size_t kInitialCodeBytes = 64 * 1024;
constexpr std::size_t kMaxCodeBytes = 256u * 1024 * 1024;

std::string_view short_dtype(DType d) {
  switch (d) {
    case DType::kHalf: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
  }
  return "unknown";
}

std::string_view short_direction(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward: return "fwd";
    case ConvDirection::kBackpropData: return "bwd_data";
    case ConvDirection::kBackpropFilter: return "bwd_filter";
  }
  return "unknown";
}

std::string kernel_name(const ir::LoopNest& nest, const cpu::CpuInfo& target) {
  std::string name = fmt::format(
      "x86_{}_{}_{}_{}", target.isa == cpu::Isa::kAvx512 ? "avx512" : "avx2",
      short_dtype(nest.problem.dtype), short_direction(nest.problem.direction),
      nest.problem.format == DataFormat::kNHWC ? "nhwc" : "nchw");
  if (!nest.schedule_summary.empty()) name += "_" + nest.schedule_summary;
  // One token, whatever separators the summary uses: names go into logs, file names and
  // perf maps.
  for (char& ch : name) {
    if (ch == ' ' || ch == ',' || ch == '/') ch = '_';
  }
  return name;
}

// Scratch blocks of one kernel, reused from run to run: a fresh multi-megabyte allocation per
// run (activation-sized copies) comes back from the allocator as unmapped pages, and faulting
// them in cost more than the copies themselves. One idle block is kept per kernel (released
// with it, or by drop_idle when the memory cache is over its byte bound); runs that overlap
// allocate their own. Blocks are never cleared: every scratch the schedule reads it has written
// first (partial sums are zeroed by the thread that owns them, padded copies write their
// borders), which the interpreter checks by filling its scratch with NaN.
class ScratchPool {
 public:
  using Block = std::unique_ptr<void, decltype(&std::free)>;

  explicit ScratchPool(std::size_t bytes) : bytes_(bytes) {}

  Block acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_) {
        idle_bytes_.store(0, std::memory_order_relaxed);
        return std::move(idle_);
      }
    }
    return allocate(bytes_);
  }

  void release(Block block) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_) {
      idle_ = std::move(block);
      idle_bytes_.store(bytes_, std::memory_order_relaxed);
    }
  }

  /// Lock-free: read after every run by the memory cache's byte accounting.
  std::size_t idle_bytes() const { return idle_bytes_.load(std::memory_order_relaxed); }

  void drop_idle() {
    Block dropped(nullptr, &std::free);  // freed after the lock
    std::lock_guard<std::mutex> lock(mutex_);
    dropped = std::move(idle_);
    idle_bytes_.store(0, std::memory_order_relaxed);
  }

 private:
  // Blocks of a megabyte or more get pages of their own, so that dropping one gives the memory
  // back to the system at once: malloc keeps a freed block of that size in its heap (its mmap
  // threshold rises with every large block freed) and the process's resident size with it.
  // The mapping's size sits in a header page in front of the block.
  static constexpr std::size_t kMappedBlockBytes = std::size_t{1} << 20;
  static constexpr std::size_t kHeaderBytes = 4096;  // a page; keeps the block page-aligned
  static_assert(kHeaderBytes % x86::kScratchAlign == 0);

  static Block allocate(std::size_t bytes) {
    if (bytes < kMappedBlockBytes) {
      return Block(std::aligned_alloc(x86::kScratchAlign, bytes), &std::free);
    }
    const std::size_t mapped =
        kHeaderBytes + (bytes + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
    void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return Block(nullptr, &std::free);
    *static_cast<std::size_t*>(base) = mapped;
    return Block(static_cast<char*>(base) + kHeaderBytes, &unmap);
  }

  static void unmap(void* block) noexcept {
    if (block == nullptr) return;
    void* base = static_cast<char*>(block) - kHeaderBytes;
    munmap(base, *static_cast<const std::size_t*>(base));
  }

  std::size_t bytes_;
  std::mutex mutex_;
  Block idle_{nullptr, &std::free};         // guarded by mutex_
  std::atomic<std::size_t> idle_bytes_{0};  // idle_ ? bytes_ : 0, written under mutex_
};

class X86Code final : public CompiledCode {
 public:
  X86Code(std::unique_ptr<x86::ExecutableMemory> code, x86::KernelLayout layout)
      : code_(std::move(code)), layout_(std::move(layout)), scratch_pool_(layout_.scratch_bytes) {}

  Status run(const OperandPointers& operands, const RunContext& context) const override {
    std::vector<void*> table(layout_.buffers.size(), nullptr);
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) {
      switch (layout_.buffers[i]) {
        case ir::BufferKind::kX: table[i] = operands.x; break;
        case ir::BufferKind::kW: table[i] = operands.w; break;
        case ir::BufferKind::kY: table[i] = operands.y; break;
        case ir::BufferKind::kScratch: break;
      }
    }
    ScratchPool::Block scratch(nullptr, &std::free);
    if (layout_.scratch_bytes > 0) {
      scratch = scratch_pool_.acquire();
      if (!scratch) {
        return resource_exhausted(fmt::format("convjit could not allocate {} bytes of kernel scratch",
                                              layout_.scratch_bytes));
      }
      for (const x86::ScratchSlot& s : layout_.scratch) {
        table[static_cast<std::size_t>(s.buffer)] = static_cast<char*>(scratch.get()) + s.offset;
      }
    }
    const std::uint8_t* code = code_->bytes().data();
    for (const x86::FunctionEntry& e : layout_.functions) {
      // Data to function pointer: the bytes are the generated function's code.
      const auto fn = reinterpret_cast<GeneratedFn>(const_cast<std::uint8_t*>(code + e.offset));  // NOLINT
      void* const* args = table.data();
      if (e.parallel) {
        if (e.trip <= 0) continue;
        if (context.parallel_for) {
          context.parallel_for(e.trip,
                               [fn, args](std::int64_t b, std::int64_t end) { fn(args, b, end); });
        } else {
          fn(args, 0, e.trip);
        }
      } else {
        fn(args, 0, 1);
      }
    }
    if (scratch) scratch_pool_.release(std::move(scratch));
    return Status::ok();
  }

  const std::string& name() const override { return layout_.name; }
  std::size_t scratch_bytes() const override { return layout_.scratch_bytes; }
  std::size_t resident_bytes() const override {
    return code_->bytes().size() + scratch_pool_.idle_bytes();
  }
  void release_idle_memory() const override { scratch_pool_.drop_idle(); }
  std::span<const std::uint8_t> code_bytes() const override { return code_->bytes(); }
  Artifacts artifacts() const override {
    const std::string info = x86::serialize_layout(layout_);
    Artifacts out;
    out[kCodeArtifactName].assign(code_->bytes().begin(), code_->bytes().end());
    out[kLoadArtifactName].assign(info.begin(), info.end());
    return out;
  }

 private:
  std::unique_ptr<x86::ExecutableMemory> code_;
  x86::KernelLayout layout_;
  mutable ScratchPool scratch_pool_;
};

class X86Backend final : public Backend {
 public:
  explicit X86Backend(const cpu::CpuInfo& cpu) : cpu_(cpu) {}

  std::string_view name() const override { return kX86BackendName; }
  const std::string& device() const override { return device_; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  std::string target_name() const override { return cpu_.name(); }

  Expected<std::unique_ptr<const Plan>> plan(const ConvProblem& problem,
                                            const PlanOptions& options) const override {
    if (cpu_.isa != cpu::Isa::kAvx512 && cpu_.isa != cpu::Isa::kAvx2) {
      return unimplemented("the x86 backend needs AVX2 or AVX-512");
    }
    if (!cpu_.has_fma) return unimplemented("the x86 backend needs FMA");
    return std::unique_ptr<const Plan>(
        std::make_unique<cpu::CpuPlan>(cpu::plan_cpu(problem, cpu_, options.num_threads)));
  }

  ir::LoopNest schedule(ir::LoopNest nest, const Plan& plan,
                        const ir::PassObserver& observer) const override {
    return cpu::schedule(std::move(nest), static_cast<const cpu::CpuPlan&>(plan), observer);
  }

  Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest& nest,
                                              const Plan& plan) const override {
    const auto& cpu_plan = static_cast<const cpu::CpuPlan&>(plan);
    Expected<std::unique_ptr<CompiledCode>> code = x86::emit_nest(nest, cpu_plan.cpu);
    if (!code.has_value() || !cpu_plan.pad_out_backprop_copies) return code;
    // The twin for filters holding Inf or NaN: the same plan without the zero borders.
    cpu::CpuPlan exact = cpu_plan;
    exact.pad_out_backprop_copies = false;
    Expected<std::unique_ptr<CompiledCode>> twin =
        x86::emit_nest(cpu::schedule(ir::lower(exact.problem), exact), exact.cpu);
    if (!twin.has_value()) return twin;
    const ConvProblem& p = cpu_plan.problem;
    return x86::finite_filter_dispatch(p.dtype, p.elements(TensorRole::kW), std::move(code).value(),
                                       std::move(twin).value());
  }

  Expected<std::unique_ptr<CompiledCode>> load(const Artifacts& artifacts) const override {
    Expected<std::unique_ptr<CompiledCode>> code = load_one(artifacts, "");
    const auto dispatch = artifacts.find(x86::kDispatchArtifact);
    if (!code.has_value() || dispatch == artifacts.end()) return code;
    DType dtype = DType::kFloat32;
    std::int64_t filter_elements = 0;
    if (!x86::parse_dispatch(std::string_view(reinterpret_cast<const char*>(dispatch->second.data()),
                                              dispatch->second.size()),
                             &dtype, &filter_elements)) {
      return invalid_argument("stored x86 code has a malformed dispatch record");
    }
    Expected<std::unique_ptr<CompiledCode>> twin = load_one(artifacts, x86::kExactTwinSuffix);
    if (!twin.has_value()) return twin;
    return x86::finite_filter_dispatch(dtype, filter_elements, std::move(code).value(),
                                       std::move(twin).value());
  }

 private:
  // The code stored under the artifact names with `suffix`.
  Expected<std::unique_ptr<CompiledCode>> load_one(const Artifacts& artifacts,
                                                   const std::string& suffix) const {
    const auto code = artifacts.find(kCodeArtifactName + suffix);
    const auto info = artifacts.find(kLoadArtifactName + suffix);
    if (code == artifacts.end() || info == artifacts.end()) {
      return invalid_argument("stored x86 code lacks its code or load artifact");
    }
    return x86::load_code(
        code->second,
        std::string_view(reinterpret_cast<const char*>(info->second.data()), info->second.size()),
        cpu_);
  }

  cpu::CpuInfo cpu_;
  std::string device_ = "cpu";
};

}  // namespace

namespace x86 {

bool can_emit(const ir::LoopNest& nest, const cpu::CpuInfo& target, std::string* why_not) {
  if (target.isa != cpu::Isa::kAvx512 && target.isa != cpu::Isa::kAvx2) {
    if (why_not != nullptr) *why_not = "the x86 backend needs AVX2 or AVX-512";
    return false;
  }
  if (!target.has_fma) {
    if (why_not != nullptr) *why_not = "the x86 backend needs FMA";
    return false;
  }
  return check_nest(nest, target.isa == cpu::Isa::kAvx512, target.has_f16c,
                    target.has_avx512_bf16, why_not);
}

Expected<std::unique_ptr<CompiledCode>> emit_nest(const ir::LoopNest& nest,
                                                  const cpu::CpuInfo& target) {
  std::string why;
  if (!can_emit(nest, target, &why)) {
    return unimplemented(fmt::format("the x86 backend cannot compile this nest: {}", why));
  }
  std::size_t size = kInitialCodeBytes;
  while (true) {
    try {
      // The generator's buffer stays read-write and is dropped once its bytes are copied
      // into their executable pages; the code is position independent (rip-relative
      // constants, relative branches), which is also what lets load_code() map stored bytes.
      Emitter gen(nest, target, size);
      std::vector<FunctionEntry> entries = gen.emit_all();
      gen.ready();
      const std::span<const std::uint8_t> bytes(gen.getCode(), gen.getSize());
      Expected<std::unique_ptr<ExecutableMemory>> memory = ExecutableMemory::from_bytes(bytes);
      if (!memory) return memory.status();
      KernelLayout layout = make_layout(nest, std::move(entries), kernel_name(nest, target),
                                        target.name(), bytes.size());
      return std::unique_ptr<CompiledCode>(
          std::make_unique<X86Code>(std::move(memory).value(), std::move(layout)));
    } catch (const Xbyak::Error& e) {
      if (static_cast<int>(e) == Xbyak::ERR_CODE_IS_TOO_BIG && size < kMaxCodeBytes) {
        size *= 4;
        continue;
      }
      return internal_error(fmt::format("x86 code generation failed: {}", e.what()));
    } catch (const std::bad_alloc&) {
      return resource_exhausted("out of memory while generating x86 code");
    }
  }
}

Expected<std::unique_ptr<CompiledCode>> load_code(std::span<const std::uint8_t> code,
                                                  std::string_view load_info,
                                                  const cpu::CpuInfo& target) {
  Expected<KernelLayout> layout = parse_layout(load_info);
  if (!layout) return layout.status();
  // The cache key already names the target; this keeps a layout from another target (or
  // a host that lost a feature) from ever reaching a call.
  if (layout->isa != target.name()) {
    return invalid_argument(fmt::format("stored x86 code is for {}, this backend targets {}",
                                        layout->isa, target.name()));
  }
  if (layout->code_size != code.size()) {
    return invalid_argument(fmt::format("stored x86 code has {} bytes, its layout says {}",
                                        code.size(), layout->code_size));
  }
  Expected<std::unique_ptr<ExecutableMemory>> memory = ExecutableMemory::from_bytes(code);
  if (!memory) return memory.status();
  return std::unique_ptr<CompiledCode>(
      std::make_unique<X86Code>(std::move(memory).value(), std::move(layout).value()));
}

}  // namespace x86

std::unique_ptr<Backend> make_x86_backend(const cpu::CpuInfo& target) {
  return std::make_unique<X86Backend>(target);
}

}  // namespace convjit::codegen
