#include "codegen/cuda/cuda_tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "codegen/cuda/cuda_gemm_shape.hpp"

namespace convjit::codegen {
namespace {

std::string dims(int a, int b) { return fmt::format("{}x{}", a, b); }
std::string dims(int a, int b, int c) { return fmt::format("{}x{}x{}", a, b, c); }

// Forced-plan texts around the model's plan `p`: a strided input gradient's residue classes
// in separate launches, the model's tile halved and doubled along M and N, deeper pipelines
// where the kernel has one, split-K halved and doubled, and the depthwise blocks halved and
// doubled. Invalid ones (shared memory, registers, divisibility)
// are dropped by the caller, which plans each through make_cuda_plan.
std::vector<std::string> variants(const CudaPlan& p) {
  std::vector<std::string> out;
  const bool wgrad = p.problem.direction == ConvDirection::kBackpropFilter;
  auto with_split = [&](std::string text) {
    if (wgrad && p.split_k > 1) text += fmt::format(",splitk={}", p.split_k);
    return text;
  };
  switch (p.algorithm) {
    case CudaAlgorithm::kImplicitGemm:
      if (p.fused_residues) {  // a strided input gradient's classes in separate launches
        out.push_back(fmt::format("algo=igemm,tile={},micro={},fuse=0",
                                  dims(p.tile_m, p.tile_n, p.tile_k),
                                  dims(p.micro_m, p.micro_n)));
      }
      for (const auto& [m, n] :
           {std::pair{2, 1}, std::pair{1, 2}, std::pair{-2, 1}, std::pair{1, -2}}) {
        const int tm = m > 0 ? p.tile_m * m : p.tile_m / -m;
        const int tn = n > 0 ? p.tile_n * n : p.tile_n / -n;
        const int um = std::max(1, tm / 16), un = std::max(1, tn / 16);
        out.push_back(with_split(
            fmt::format("algo=igemm,tile={},micro={}", dims(tm, tn, p.tile_k), dims(um, un))));
      }
      if (p.stages > 1) {  // one shared stage: half the shared memory, a barrier more per slice
        out.push_back(with_split(fmt::format("algo=igemm,tile={},micro={},stages=1",
                                             dims(p.tile_m, p.tile_n, p.tile_k),
                                             dims(p.micro_m, p.micro_n))));
      }
      break;
    case CudaAlgorithm::kTensorCore: {
      const std::string algo = "algo=mma";
      if (p.fused_residues) {  // a strided input gradient's classes in separate launches
        out.push_back(fmt::format("{},tile={},warps={},stages={},fuse=0", algo,
                                  dims(p.tile_m, p.tile_n, p.tile_k), dims(p.warps_m, p.warps_n),
                                  p.stages));
      }
      out.push_back(with_split(fmt::format("{},tile={},warps={}", algo,
                                           dims(p.tile_m * 2, p.tile_n, p.tile_k),
                                           dims(p.warps_m * 2, p.warps_n))));
      out.push_back(with_split(fmt::format("{},tile={},warps={}", algo,
                                           dims(p.tile_m, p.tile_n * 2, p.tile_k),
                                           dims(p.warps_m, p.warps_n * 2))));
      out.push_back(with_split(fmt::format("{},tile={},warps={}", algo,
                                           dims(p.tile_m, p.tile_n, p.tile_k * 2),
                                           dims(p.warps_m, p.warps_n))));
      if (p.stages > 1) {
        out.push_back(with_split(fmt::format("{},tile={},warps={},stages={}", algo,
                                             dims(p.tile_m, p.tile_n, p.tile_k),
                                             dims(p.warps_m, p.warps_n), p.stages + 1)));
      }
      break;
    }
    case CudaAlgorithm::kDepthwise: {
      const bool dgrad = p.problem.direction == ConvDirection::kBackpropData;
      for (const auto& [c, q] :
           {std::pair{2, -2}, std::pair{-2, 2}, std::pair{1, 2}, std::pair{1, -2}}) {
        const int cb = c > 0 ? p.channel_block * c : p.channel_block / -c;
        const int pb = q > 0 ? p.pixel_block * q : p.pixel_block / -q;
        if (cb < 1 || pb < 1) continue;
        std::string text = fmt::format("algo=dw,cblock={},pblock={}", cb, pb);
        if (!dgrad) text += fmt::format(",mblock={}", p.multiplier_block);
        out.push_back(with_split(text));
      }
      break;
    }
    default:
      break;  // zero fill and the direct kernel have nothing to tune
  }
  if (wgrad &&
      (p.algorithm == CudaAlgorithm::kImplicitGemm || p.algorithm == CudaAlgorithm::kTensorCore ||
       p.algorithm == CudaAlgorithm::kDepthwise)) {
    const std::string algo = p.algorithm == CudaAlgorithm::kImplicitGemm ? "igemm"
                             : p.algorithm == CudaAlgorithm::kTensorCore ? "mma"
                                                                         : "dw";
    for (int split : {p.split_k * 2, p.split_k / 2}) {
      if (split >= 1 && split <= 64 && split != p.split_k) {
        out.push_back(fmt::format("algo={},splitk={}", algo, split));
      }
    }
  }
  return out;
}

}  // namespace

Expected<std::vector<CudaTuneCandidate>> cuda_tune_candidates(const ConvProblem& problem,
                                                              const CudaDeviceInfo& device,
                                                              const PlanOptions& options,
                                                              int max_candidates) {
  std::vector<CudaTuneCandidate> out;
  Expected<std::unique_ptr<CudaPlan>> model = make_cuda_plan(problem, device, options);
  if (!model) return model.status();
  std::set<std::string> names{(*model)->kernel_name};
  const std::vector<std::string> texts =
      options.forced.empty() ? variants(**model) : std::vector<std::string>{};
  out.push_back({options.forced, std::move(model).value()});
  for (const std::string& text : texts) {
    if (static_cast<int>(out.size()) >= max_candidates) break;
    PlanOptions o = options;
    o.forced = text;
    Expected<std::unique_ptr<CudaPlan>> plan = make_cuda_plan(problem, device, o);
    if (!plan || !names.insert((*plan)->kernel_name).second) continue;
    out.push_back({text, std::move(plan).value()});
  }
  return out;
}

Expected<CudaTuneResult> tune_cuda_plan(const ConvProblem& problem, const CudaDeviceInfo& device,
                                        const PlanOptions& options, const CudaTuneMeasure& measure,
                                        double budget_ms, CudaTuneClock clock) {
  if (!clock) {
    clock = [] {
      return std::chrono::duration<double, std::milli>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  const double start = clock();
  Expected<std::vector<CudaTuneCandidate>> candidates =
      cuda_tune_candidates(problem, device, options);
  if (!candidates) return candidates.status();
  CudaTuneResult result;
  double best_us = 0, slowest_ms = 0;
  int best = -1;
  for (std::size_t i = 0; i < candidates->size(); ++i) {
    CudaTuneCandidate& c = (*candidates)[i];
    const double before = clock();
    if (i > 0 && before - start + slowest_ms > budget_ms) {
      result.log +=
          fmt::format("{} skipped (tuning budget {:.0f} ms)\n", c.plan->kernel_name, budget_ms);
      continue;
    }
    Expected<double> us = measure(*c.plan);
    const double took = clock() - before;
    slowest_ms = std::max(slowest_ms, took);
    ++result.measured;
    if (!us) {
      result.log += fmt::format("{} failed: {}\n", c.plan->kernel_name, us.status().message());
      continue;
    }
    result.log += fmt::format("{} {:.1f} us{}\n", c.plan->kernel_name, *us,
                              c.forced.empty() ? " (model)" : "");
    if (i == 0) result.model_us = *us;
    if (best < 0 || *us < best_us) {
      best = static_cast<int>(i);
      best_us = *us;
    }
  }
  result.spent_ms = clock() - start;
  result.winner_us = best < 0 ? 0 : best_us;
  result.winner = std::move((*candidates)[best < 0 ? 0 : static_cast<std::size_t>(best)].plan);
  return result;
}

std::string tuning_summary(const CudaTuneResult& result) {
  return fmt::format("tuned={}plans/{:.0f}ms(model {:.1f}us, winner {:.1f}us)", result.measured,
                     result.spent_ms, result.model_us, result.winner_us);
}

}  // namespace convjit::codegen
