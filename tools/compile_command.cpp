// `convjit compile`: the descriptor flags of `convjit run`, plus the target. CUDA architectures
// go through the CUDA backend's plan, generator and NVRTC (registers, spills and shared memory
// from ptxas); the CPU ISAs through the x86 backend. Like `convjit cache`, this tool reads the
// library's internals (the code it reports on is not part of the public API).
#include "tools/compile_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <xxhash.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "convjit/convjit.hpp"
#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "tools/cli_args.hpp"
#include "tools/run_options.hpp"

#if __has_include("codegen/x86/x86_backend.hpp")
#include "codegen/x86/x86_backend.hpp"
#define CONVJIT_COMPILE_X86 1
#endif
#ifdef CONVJIT_HAVE_CUDA
#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#endif

namespace convjit::cli {
namespace {

using Json = nlohmann::json;

// Flags of this command; every other flag is a descriptor flag of `convjit run`.
struct CompileFlags {
  std::string target;
  bool source = false;
  bool ptx = false;
  bool json = false;
  std::string forced;
  MathMode math = MathMode::kExact;
};

constexpr FlagSpec kOwnFlags[] = {
    {"target", "NAME",
     "sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, sm_120, or avx2 / avx512"},
    {"math", "MODE", "exact (default) or tf32 (CUDA float32 on tensor cores)"},
    {"plan", "KEYS",
     "force plan choices, e.g. algo=igemm,tile=64x32x8,splitk=2 (see docs/CUDA.md)"},
    {"source", "", "print the generated CUDA translation unit"},
    {"ptx", "", "print NVRTC's PTX"},
    {"json", "", "print the report as JSON"},
};

bool takes_value(std::string_view name) {
  return name != "source" && name != "ptx" && name != "json";
}

std::string format_ms(double ms) {
  return ms >= 1 ? fmt::format("{:.1f} ms", ms) : fmt::format("{:.0f} us", ms * 1000);
}

/// Splits the words into this command's flags and the descriptor flags.
std::vector<std::string_view> split_flags(std::span<const std::string_view> args, CompileFlags* f,
                                          bool* help) {
  std::vector<std::string_view> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view word = args[i];
    if (word == "--help" || word == "-h") {
      *help = true;
      continue;
    }
    if (word.substr(0, 2) != "--") {
      rest.push_back(word);
      continue;
    }
    std::string_view name = word.substr(2), value;
    bool inline_value = false;
    if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    bool own = false;
    for (const FlagSpec& spec : kOwnFlags) own = own || spec.name == name;
    if (!own) {
      rest.push_back(word);
      continue;
    }
    if (takes_value(name) && !inline_value) {
      if (i + 1 >= args.size()) throw UsageError(fmt::format("--{} needs a value", name));
      value = args[++i];
    }
    if (name == "target") f->target = std::string(value);
    if (name == "plan") f->forced = std::string(value);
    if (name == "source") f->source = true;
    if (name == "ptx") f->ptx = true;
    if (name == "json") f->json = true;
    if (name == "math") {
      if (value == "tf32") {
        f->math = MathMode::kTF32;
      } else if (value != "exact") {
        throw UsageError(fmt::format("--math must be exact or tf32, not '{}'", value));
      }
    }
  }
  return rest;
}

void print_help(std::ostream& out) {
  std::string descriptor_flags;
  for (const FlagSpec& spec : run_flag_specs()) {
    if (spec.role == FlagRole::kDescriptor) {
      descriptor_flags += fmt::format("  --{} {}\n", spec.name, spec.metavar);
    }
  }
  descriptor_flags +=
      "  --threads N (CPU targets: the threads the kernel is planned for, default 1)\n";
  fmt::print(
      out,
      "usage: convjit compile --target NAME [descriptor flags] [flags]\n"
      "\n"
      "Compiles one op for a named target without running it (no GPU needed for a CUDA\n"
      "architecture) and prints the kernel's name, compile time, registers per thread,\n"
      "spill bytes and shared memory (CUDA) or code size and digest (CPU: two builds that\n"
      "print the same digest generate the same machine code).\n"
      "\n"
      "flags:\n{}\n"
      "descriptor flags (as for convjit run):\n{}"
      "\n"
      "example:\n"
      "  convjit compile --target sm_90 --op Conv2DBackpropFilter --input-sizes 8,56,56,64 \\\n"
      "      --filter-sizes 3,3,64,64 --padding SAME --dtype bfloat16 --source\n",
      format_flag_help(kOwnFlags), descriptor_flags);
}

#ifdef CONVJIT_HAVE_CUDA
int compile_cuda(const OpDescriptor& desc, const ConvProblem& problem, const CompileFlags& f,
                 std::ostream& out, std::ostream& err) {
  Expected<codegen::CudaDeviceInfo> device = codegen::known_cuda_target(f.target);
  if (!device) {
    fmt::print(err, "convjit compile: {}\n", device.status().message());
    return kExitUsage;
  }
  codegen::PlanOptions options;
  options.math_mode = f.math;
  options.forced = f.forced;
  const auto start = std::chrono::steady_clock::now();
  Expected<codegen::CudaCompileReport> report =
      codegen::compile_cuda_for_target(problem, *device, options);
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!report) {
    fmt::print(err, "convjit compile: {}\n", report.status().to_string());
    return kExitFailure;
  }
  const codegen::CudaProgram& program = report->program;
  if (f.json) {
    Json j;
    j["descriptor"] = to_text(desc);
    j["target"] = device->arch_name();
    j["nvrtc"] = report->nvrtc_version;
    j["kernel"] = program.kernel_name;
    j["plan"] = report->plan_text;
    j["compile_ms"] = total_ms;
    j["nvrtc_ms"] = report->binary.compile_ms;
    j["workspace_bytes"] = program.workspace_bytes;
    j["cubin_bytes"] = report->binary.cubin.size();
    Json kernels = Json::array();
    for (const codegen::CudaKernelResources& k : report->binary.kernels) {
      kernels.push_back({{"symbol", k.symbol},
                         {"registers", k.registers},
                         {"spill_store_bytes", k.spill_store_bytes},
                         {"spill_load_bytes", k.spill_load_bytes},
                         {"stack_bytes", k.stack_bytes},
                         {"shared_bytes", k.shared_bytes}});
    }
    j["kernels"] = kernels;
    if (f.source) j["source"] = codegen::nvrtc_translation_unit(program);
    if (f.ptx) j["ptx"] = report->binary.ptx;
    fmt::print(out, "{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print(out, "descriptor  {}\n", to_text(desc));
  fmt::print(out, "target      {} ({}), NVRTC {}\n", device->arch_name(), device->name,
             report->nvrtc_version);
  fmt::print(out, "kernel      {}\n", program.kernel_name);
  fmt::print(out, "plan        {}\n", report->plan_text);
  fmt::print(out, "compile     {} (generate {}, NVRTC {}); cubin {} bytes, PTX {} bytes\n",
             format_ms(total_ms), format_ms(report->generate_ms),
             format_ms(report->binary.compile_ms), report->binary.cubin.size(),
             report->binary.ptx.size());
  fmt::print(out, "workspace   {} bytes\n", program.workspace_bytes);
  for (const codegen::CudaLaunch& l : program.launches) {
    const codegen::CudaKernelResources* r = nullptr;
    for (const codegen::CudaKernelResources& k : report->binary.kernels) {
      if (k.symbol == l.symbol) r = &k;
    }
    fmt::print(out, "launch      {} grid {}x{}x{} block {}\n", l.symbol, l.grid[0], l.grid[1],
               l.grid[2], l.block[0] * l.block[1] * l.block[2]);
    if (r != nullptr) {
      fmt::print(out,
                 "resources   {} registers/thread, spills {} B stored {} B loaded, stack {} B, "
                 "shared {} B\n",
                 r->registers, r->spill_store_bytes, r->spill_load_bytes, r->stack_bytes,
                 r->shared_bytes);
    }
  }
  if (program.launches.empty()) fmt::print(out, "launch      none (the output is empty)\n");
  if (f.source) fmt::print(out, "\n{}", codegen::nvrtc_translation_unit(program));
  if (f.ptx) fmt::print(out, "\n{}", report->binary.ptx);
  return kExitOk;
}
#endif

#ifdef CONVJIT_COMPILE_X86
// The target an `isa` host would get, with every feature the emitter uses at that ISA.
cpu::CpuInfo cpu_target(cpu::Isa isa) {
  cpu::CpuInfo t = cpu::CpuInfo::host(isa);
  if (t.isa != isa) {  // another machine's code: the defaults, not this host's tuning
    t.l1_bytes = cpu::CpuInfo::kDefaultL1Bytes;
    t.l2_bytes = cpu::CpuInfo::kDefaultL2Bytes;
  }
  t.isa = isa;
  t.has_fma = t.has_f16c = true;
  t.vector_bytes = isa == cpu::Isa::kAvx512 ? 64 : 32;
  t.vector_registers = isa == cpu::Isa::kAvx512 ? 32 : 16;
  t.has_avx512_bf16 = isa == cpu::Isa::kAvx512;
  return t;
}

int compile_cpu(const OpDescriptor& desc, const ConvProblem& problem, const CompileFlags& f,
                int threads, std::ostream& out, std::ostream& err) {
  const cpu::Isa isa = f.target == "avx512" ? cpu::Isa::kAvx512 : cpu::Isa::kAvx2;
  const cpu::CpuInfo target = cpu_target(isa);
  const std::unique_ptr<codegen::Backend> backend = codegen::make_x86_backend(target);
  codegen::PlanOptions options;
  options.num_threads = threads;
  const auto start = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<codegen::CompiledCode>> code =
      codegen::compile(*backend, problem, options);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!code) {
    fmt::print(err, "convjit compile: {}\n", code.status().to_string());
    return kExitFailure;
  }
  // The code's digest, so that two builds can be compared kernel by kernel (the code holds no
  // absolute address: constants are read relative to the instruction pointer).
  const std::span<const std::uint8_t> bytes = (*code)->code_bytes();
  const std::string digest = fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
  if (f.json) {
    fmt::print(out, "{}\n",
               Json{{"descriptor", to_text(desc)},
                    {"target", target.name()},
                    {"threads", threads},
                    {"kernel", (*code)->name()},
                    {"compile_ms", ms},
                    {"code_bytes", bytes.size()},
                    {"code_xxh3", digest},
                    {"scratch_bytes", (*code)->scratch_bytes()}}
                   .dump(2));
    return kExitOk;
  }
  fmt::print(out, "descriptor  {}\n", to_text(desc));
  fmt::print(out, "target      {}, {} thread{}\n", target.name(), threads, threads == 1 ? "" : "s");
  fmt::print(out, "kernel      {}\n", (*code)->name());
  fmt::print(out, "compile     {}\n", format_ms(ms));
  fmt::print(out, "code        {} bytes (xxh3 {}), scratch {} bytes per run\n", bytes.size(),
             digest, (*code)->scratch_bytes());
  return kExitOk;
}
#endif

int compile_checked(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  CompileFlags f;
  bool help = false;
  const std::vector<std::string_view> rest = split_flags(args, &f, &help);
  if (help) {
    print_help(out);
    return kExitOk;
  }
  if (f.target.empty()) throw UsageError("--target is required (e.g. sm_80, sm_90a, avx2)");
  // The flags of `convjit run` that only a run reads (its tensors, checks and timing): refused,
  // not silently ignored.
  const ParsedFlags given = parse_flags(rest, run_flag_specs());
  for (const FlagSpec& spec : run_flag_specs()) {
    if (spec.role == FlagRole::kRunOnly && given.has(spec.name)) {
      throw UsageError(
          fmt::format("--{} is a flag of convjit run; convjit compile runs nothing", spec.name));
    }
  }
  const RunOptions run_options = run_options_from(given);
  const OpDescriptor desc = build_descriptor(run_options, OperandShapes{});
  Expected<ConvProblem> problem = validate(desc);
  if (!problem) {
    fmt::print(err, "convjit compile: {}\n", problem.status().to_string());
    return kExitFailure;
  }
  if (f.target == "avx2" || f.target == "avx512") {
#ifdef CONVJIT_COMPILE_X86
    if (!f.forced.empty()) throw UsageError("--plan applies to CUDA targets");
    return compile_cpu(desc, *problem, f, std::max(run_options.threads, 1), out, err);
#else
    fmt::print(err, "convjit compile: this build has no x86 backend\n");
    return kExitFailure;
#endif
  }
  if (run_options.threads > 0)
    throw UsageError("--threads applies to the CPU targets (avx2, avx512)");
#ifdef CONVJIT_HAVE_CUDA
  return compile_cuda(desc, *problem, f, out, err);
#else
  fmt::print(err,
             "convjit compile: target '{}': this build has no CUDA backend "
             "(-DCONVJIT_CUDA=OFF or no CUDA toolkit)\n",
             f.target);
  return kExitFailure;
#endif
}

}  // namespace

int compile_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  try {
    return compile_checked(args, out, err);
  } catch (const UsageError& e) {
    fmt::print(err, "convjit compile: {}\nRun 'convjit compile --help' for the flags.\n", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    fmt::print(err, "convjit compile: {}\n", e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(err, "convjit compile: {}\n", e.what());
    return kExitFailure;
  }
}

}  // namespace convjit::cli
