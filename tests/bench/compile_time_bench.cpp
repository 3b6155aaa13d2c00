// Compile-time benchmark: for every kernel of the benchmark suite (shared/bench/shapes.txt),
// the median time to lower and schedule its nest and to generate its x86 code, for a chosen
// ISA whether or not the host has it (AVX-512 code is generated, never run, on an AVX2 host:
// generation does not depend on the host's speed at running it). A program, not a test: it
// prints times, it asserts none.
//
//   convjit_compile_bench [--isa avx512|avx2] [--threads 1,2] [--dtypes f32,bf16]
//                         [--fmas-per-cycle 1|2] [--repeats N] --shapes FILE
//                         [--print-ir SHAPE]
//
// --print-ir prints the scheduled loop nest of every kernel of the named suite shape, as the
// target would get it (CONVJIT_VERBOSE=2 shows the same for the host's own target only).
//
// --fmas-per-cycle sets the target's FMA rate: by default the host's at that ISA, or 2 for an
// ISA the host lacks (whose caches are then the defaults, too). The suite's Zen 4 reference
// machine runs zmm FMAs at 1 a cycle and has the default caches.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_shapes.hpp"
#include "codegen/x86/x86_backend.hpp"
#include "frontend/validate.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "ir/printer.hpp"

namespace convjit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The target a host of `isa` would get, with every feature the emitter uses at that ISA, and
// `fmas_per_cycle` when it is above 0.
cpu::CpuInfo target_for(cpu::Isa isa, int fmas_per_cycle) {
  cpu::CpuInfo t = cpu::CpuInfo::host(isa);
  if (t.isa != isa) {  // another machine's code: the defaults, not this host's tuning
    t.fmas_per_cycle = 2;
    t.l1_bytes = cpu::CpuInfo::kDefaultL1Bytes;
    t.l2_bytes = cpu::CpuInfo::kDefaultL2Bytes;
  }
  if (fmas_per_cycle > 0) t.fmas_per_cycle = fmas_per_cycle;
  t.isa = isa;
  t.has_fma = t.has_f16c = true;
  if (isa == cpu::Isa::kAvx512) {
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_avx512_bf16 = true;
  } else {
    t.vector_bytes = 32;
    t.vector_registers = 16;
    t.has_avx512_bf16 = false;
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  std::string isa_name = "avx512", threads_list = "1,2", dtypes_list = "f32,bf16";
  std::string shapes_path, print_ir;
  int repeats = 15, fmas_per_cycle = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--isa") {
      isa_name = value;
    } else if (flag == "--threads") {
      threads_list = value;
    } else if (flag == "--dtypes") {
      dtypes_list = value;
    } else if (flag == "--repeats") {
      repeats = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--fmas-per-cycle") {
      fmas_per_cycle = std::atoi(value.c_str());
      if (fmas_per_cycle != 1 && fmas_per_cycle != 2) {
        std::fprintf(stderr, "--fmas-per-cycle takes 1 or 2\n");
        return 2;
      }
    } else if (flag == "--print-ir") {
      print_ir = value;
    } else if (flag == "--shapes") {
      shapes_path = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (shapes_path.empty()) {
    std::fprintf(stderr, "--shapes FILE is required (e.g. ../shared/bench/shapes.txt)\n");
    return 2;
  }
  if (isa_name != "avx512" && isa_name != "avx2") {
    std::fprintf(stderr, "--isa takes avx512 or avx2\n");
    return 2;
  }
  const cpu::Isa isa = isa_name == "avx512" ? cpu::Isa::kAvx512 : cpu::Isa::kAvx2;
  const std::vector<bench::BenchShape> shapes = bench::load_shapes(shapes_path);

  std::printf("%-20s %-11s %-4s %2s %9s %9s %9s %8s  %s\n", "shape", "op", "dt", "th", "sched-ms",
              "gen-ms", "total-ms", "bytes", "kernel");
  std::vector<double> totals;
  for (const std::string& threads_text : split_list(threads_list)) {
    const int threads = std::max(1, std::atoi(threads_text.c_str()));
    const cpu::CpuInfo target = target_for(isa, fmas_per_cycle);
    for (const std::string& dt : split_list(dtypes_list)) {
      const DType dtype = dt == "bf16"  ? DType::kBFloat16
                          : dt == "f16" ? DType::kHalf
                                        : DType::kFloat32;
      for (const bench::BenchShape& shape : shapes) {
        for (bench::BenchOp op : bench::ops_for(shape)) {
          Expected<ConvProblem> problem = validate(bench::make_descriptor(shape, op, dtype));
          if (!problem.has_value()) {
            std::fprintf(stderr, "%s: %s\n", shape.name.c_str(),
                         problem.status().to_string().c_str());
            return 1;
          }
          std::vector<double> sched, gen;
          std::size_t bytes = 0;
          std::string name, ir_text;
          for (int r = 0; r < repeats; ++r) {
            const Clock::time_point t0 = Clock::now();
            const ir::LoopNest nest = cpu::lower_and_schedule(problem.value(), target, threads);
            const Clock::time_point t1 = Clock::now();
            auto code = codegen::x86::emit_nest(nest, target);
            const Clock::time_point t2 = Clock::now();
            if (!code.has_value()) {
              std::fprintf(stderr, "%s: %s\n", shape.name.c_str(),
                           code.status().to_string().c_str());
              return 1;
            }
            sched.push_back(ms_between(t0, t1));
            gen.push_back(ms_between(t1, t2));
            bytes = code.value()->code_bytes().size();
            name = code.value()->name();
            if (shape.name == print_ir) ir_text = ir::print(nest);
          }
          const double s = median(sched), g = median(gen);
          totals.push_back(s + g);
          std::printf("%-20s %-11s %-4s %2d %9.3f %9.3f %9.3f %8zu  %s\n", shape.name.c_str(),
                      bench::bench_op_name(shape, op), dt.c_str(), threads, s, g, s + g, bytes,
                      name.c_str());
          if (!ir_text.empty()) std::printf("%s\n", ir_text.c_str());
        }
      }
    }
  }
  const auto over = std::count_if(totals.begin(), totals.end(), [](double t) { return t > 1.0; });
  std::printf("\n%zu kernels: median %.3f ms, max %.3f ms, %td over 1 ms\n", totals.size(),
              median(totals), *std::max_element(totals.begin(), totals.end()), over);
  return 0;
}

}  // namespace
}  // namespace convjit

int main(int argc, char** argv) {
  try {
    return convjit::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convjit_compile_bench: %s\n", e.what());
    return 1;
  }
}
