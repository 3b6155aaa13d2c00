// NVRTC compiles every descriptor of the test sweeps for sm_80 and sm_90 (no GPU needed): no
// kernel spills or uses local memory, and each kernel's registers leave room for at least two
// resident blocks per SM. Forced plans cover each algorithm the plan can choose.
#ifdef CONVJIT_HAVE_CUDA

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "codegen/cuda/cuda_tune.hpp"
#include "frontend/validate.hpp"
#include "support/sweep_cases.hpp"

namespace convjit::codegen {
namespace {

/// Registers a block of `threads` occupies: allocated per warp in units of 256.
int block_registers(int registers_per_thread, int threads) {
  const int per_warp = (registers_per_thread * 32 + 255) / 256 * 256;
  return per_warp * ((threads + 31) / 32);
}

struct CompileJob {
  ConvProblem problem;
  std::string forced;
  std::string label;
};

std::vector<CompileJob> sweep_jobs(bool with_forced) {
  std::vector<CompileJob> jobs;
  int index = 0;
  for (const testing::SweepCase& s : testing::sweep_cases()) {
    Expected<ConvProblem> p = validate(s.geometry.descriptor(s.op));
    if (!p) {
      ADD_FAILURE() << p.status().to_string();
      continue;
    }
    const std::string label = to_text(s.geometry.descriptor(s.op));
    jobs.push_back({*p, "", label});
    if (!with_forced || p->is_empty() || index++ % 6 != 0) continue;
    // Every algorithm that applies, on a sixth of the cases (the interpret sweep executes
    // forced plans on more; here NVRTC checks their PTX, registers and spills).
    jobs.push_back({*p, "algo=direct", label});
    jobs.push_back({*p, "algo=igemm", label});
    if (p->dtype != DType::kFloat32) jobs.push_back({*p, "algo=mma", label});
    if (p->filter_in == 1 && p->direction != ConvDirection::kForward) {
      jobs.push_back({*p, "algo=dw", label});
    }
  }
  return jobs;
}

void compile_all(const std::vector<CompileJob>& jobs, const CudaDeviceInfo& device) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      const CompileJob& job = jobs[i];
      PlanOptions options;
      options.forced = job.forced;
      Expected<CudaCompileReport> report = compile_cuda_for_target(job.problem, device, options);
      std::string problem;
      if (!report) {
        problem = report.status().to_string();
      } else {
        const int threads = report->program.launches.empty()
                                ? 0
                                : static_cast<int>(report->program.launches.front().block[0]);
        if (report->binary.kernels.size() != report->program.launches.size() &&
            !report->program.launches.empty()) {
          problem = fmt::format("ptxas reported {} kernels for {} launches:\n{}",
                                report->binary.kernels.size(), report->program.launches.size(),
                                report->binary.log);
        }
        for (const CudaKernelResources& k : report->binary.kernels) {
          int block_threads = threads;
          for (const CudaLaunch& l : report->program.launches) {
            if (l.symbol == k.symbol) block_threads = static_cast<int>(l.block[0]);
          }
          if (k.spill_store_bytes != 0 || k.spill_load_bytes != 0 || k.stack_bytes != 0) {
            problem += fmt::format("{} spills ({} B stored, {} B loaded, {} B stack)\n", k.symbol,
                                   k.spill_store_bytes, k.spill_load_bytes, k.stack_bytes);
          }
          if (2 * block_registers(k.registers, block_threads) > device.registers_per_sm) {
            problem += fmt::format("{} uses {} registers x {} threads: under 2 blocks per SM\n",
                                   k.symbol, k.registers, block_threads);
          }
          if (2 * k.shared_bytes > device.shared_bytes_per_sm) {
            problem += fmt::format("{} uses {} B of shared memory: under 2 blocks per SM\n",
                                   k.symbol, k.shared_bytes);
          }
        }
      }
      if (!problem.empty()) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(
            fmt::format("{} [{}] on {}: {}", job.label, job.forced, device.arch_name(), problem));
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned count = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < count; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 10); ++i) {
    ADD_FAILURE() << failures[i];
  }
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << jobs.size() << " compiles failed";
}

bool nvrtc_available(std::string* why) {
  Expected<const NvrtcCompiler*> nvrtc = NvrtcCompiler::get();
  if (!nvrtc) *why = nvrtc.status().message();
  return nvrtc.has_value();
}

class CudaNvrtcSweep : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaNvrtcSweep, EveryKernelCompilesWithoutSpills) {
  std::string why;
  // NVRTC comes with the CUDA toolkit this build found; its absence at run time is a failure.
  ASSERT_TRUE(nvrtc_available(&why)) << why;
  Expected<CudaDeviceInfo> device = known_cuda_target(GetParam());
  ASSERT_TRUE(device.has_value());
  compile_all(sweep_jobs(/*with_forced=*/GetParam() == "sm_80"), *device);
}

INSTANTIATE_TEST_SUITE_P(Targets, CudaNvrtcSweep, ::testing::Values("sm_80", "sm_90"));

// CONVJIT_CUDA_TUNE may pick any candidate the model proposes: every one of them, on real
// network layers (gpu_networks.txt) of each kernel family, compiles without spills too.
TEST(CudaNvrtcTune, EveryTuningCandidateCompilesWithoutSpills) {
  std::string why;
  ASSERT_TRUE(nvrtc_available(&why)) << why;
  Expected<CudaDeviceInfo> device = known_cuda_target("sm_90");
  ASSERT_TRUE(device.has_value());
  auto layer = [](OpKind op, DType dtype, std::int64_t n, std::int64_t size, std::int64_t c,
                  std::int64_t m, std::int64_t stride, bool dw) {
    OpDescriptor d;
    d.op = op;
    d.dtype = dtype;
    const std::int64_t out = (size + stride - 1) / stride;
    d.input = {n, size, size, c};
    d.filter = {dw ? 3 : (m > 256 ? 1 : 3), dw ? 3 : (m > 256 ? 1 : 3), c, m};
    d.out_backprop = {n, out, out, dw ? c * m : m};
    d.strides = {1, stride, stride, 1};
    d.padding = Padding::kSame;
    return d;
  };
  const std::vector<OpDescriptor> layers = {
      // r50_l2_3x3_128_s2, r50_l3_1x1_256_1024, r50_l1_3x3_64, mv2_dw_112_c96_s2, mv2_dw_28_c192
      layer(OpKind::kConv2DBackpropInput, DType::kBFloat16, 64, 56, 128, 128, 2, false),
      layer(OpKind::kConv2DBackpropFilter, DType::kHalf, 64, 14, 256, 1024, 1, false),
      layer(OpKind::kConv2DBackpropFilter, DType::kFloat32, 64, 56, 64, 64, 1, false),
      layer(OpKind::kDepthwiseConv2dNativeBackpropInput, DType::kHalf, 64, 112, 96, 1, 2, true),
      layer(OpKind::kDepthwiseConv2dNativeBackpropFilter, DType::kBFloat16, 64, 28, 192, 1, 1,
            true),
  };
  std::vector<CompileJob> jobs;
  for (const OpDescriptor& d : layers) {
    Expected<ConvProblem> p = validate(d);
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    Expected<std::vector<CudaTuneCandidate>> c = cuda_tune_candidates(*p, *device, {});
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_GE(c->size(), 3u) << to_text(d);
    for (const CudaTuneCandidate& candidate : *c) {
      jobs.push_back({*p, candidate.forced, to_text(d)});
    }
  }
  compile_all(jobs, *device);
}

}  // namespace
}  // namespace convjit::codegen

#endif  // CONVJIT_HAVE_CUDA
