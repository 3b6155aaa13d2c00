// NVRTC cold-compile time of the CUDA backend's kernels (a CPU cost: no GPU needed): every
// descriptor of the test sweeps is planned, generated and compiled for one architecture, one at
// a time, and the median, 90th percentile and maximum are printed; with --interpret, the interpret
// mode's host build of the same sources too. The machine's other load shows in the numbers:
// compare runs taken on a quiet machine only.
//   convjit_cuda_compile_bench [--target sm_80] [--math tf32] [--limit N] [--interpret]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "runtime/cuda/interpret/host_object.hpp"
#include "support/sweep_cases.hpp"

namespace {

using convjit::codegen::CudaCompileReport;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

void summary(const char* what, const std::vector<double>& ms) {
  std::printf("%-28s %5zu kernels  median %7.1f ms  p90 %7.1f ms  max %7.1f ms\n", what, ms.size(),
              percentile(ms, 0.5), percentile(ms, 0.9),
              ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()));
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "sm_80";
  std::size_t limit = static_cast<std::size_t>(-1);
  bool interpret = false;
  convjit::MathMode math = convjit::MathMode::kExact;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (arg == "--limit" && i + 1 < argc) {
      limit = static_cast<std::size_t>(std::atol(argv[++i]));
    } else if (arg == "--math" && i + 1 < argc) {
      math =
          std::string(argv[++i]) == "tf32" ? convjit::MathMode::kTF32 : convjit::MathMode::kExact;
    } else if (arg == "--interpret") {
      interpret = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--target sm_80] [--math exact|tf32] [--limit N] [--interpret]\n",
                   argv[0]);
      return 2;
    }
  }
  auto device = convjit::codegen::known_cuda_target(target);
  if (!device) {
    std::fprintf(stderr, "%s\n", device.status().message().c_str());
    return 2;
  }
  std::vector<double> generate_ms, nvrtc_ms, host_ms;
  std::size_t done = 0;
  for (const convjit::testing::SweepCase& s : convjit::testing::sweep_cases()) {
    if (s.empty || done >= limit) continue;
    auto problem = convjit::validate(s.geometry.descriptor(s.op));
    if (!problem) continue;
    convjit::codegen::PlanOptions options;
    options.math_mode = math;
    auto report = convjit::codegen::compile_cuda_for_target(*problem, *device, options);
    if (!report) {
      std::fprintf(stderr, "%s: %s\n", convjit::to_text(*problem).c_str(),
                   report.status().to_string().c_str());
      return 1;
    }
    ++done;
    generate_ms.push_back(report->generate_ms);
    nvrtc_ms.push_back(report->binary.compile_ms);
    if (interpret) {
      // A changed name makes a source the in-memory object cache has not seen.
      const auto start = std::chrono::steady_clock::now();
      auto object = convjit::runtime::interpret::HostObject::build(
          report->program.body, report->program.kernel_name + "_bench" + std::to_string(done));
      if (!object) {
        std::fprintf(stderr, "%s\n", object.status().to_string().c_str());
        return 1;
      }
      host_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
  }
  std::printf("CUDA kernels of the test sweeps for %s (%s math)\n", target.c_str(),
              math == convjit::MathMode::kTF32 ? "tf32" : "exact");
  summary("plan + generate", generate_ms);
  summary("NVRTC compile (cold)", nvrtc_ms);
  if (interpret) summary("interpret host build", host_ms);
  return 0;
}
