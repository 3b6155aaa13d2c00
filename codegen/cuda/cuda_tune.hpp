// Bounded autotuning (CONVJIT_CUDA_TUNE=1): the plan model proposes a handful of candidate
// plans around its own choice (tiles, pipeline stages, split-K, depthwise blocking), each is
// compiled and timed once on the device, and the fastest becomes the plan. The runtime stores
// the result in the caches under a key with "tune=1", so later compiles of the descriptor on
// the same device (the key holds the target) reuse the winner without tuning again.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "codegen/cuda/cuda_plan.hpp"
#include "frontend/problem.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// At most this many plans are timed per descriptor (the model's own included).
inline constexpr int kMaxTuneCandidates = 6;
/// Tuning stops before a candidate that would take the total past this (the model's plan is
/// always timed).
inline constexpr double kTuneBudgetMs = 2000;

/// One plan to try: the forced-plan text that gives it ("" for the model's plan) and the plan.
struct CudaTuneCandidate {
  std::string forced;
  std::unique_ptr<CudaPlan> plan;
};

/// The model's plan first, then valid variants of it (each a distinct kernel), at most
/// `max_candidates`. A caller-forced plan (options.forced) is not tuned: just that plan.
Expected<std::vector<CudaTuneCandidate>> cuda_tune_candidates(
    const ConvProblem& problem, const CudaDeviceInfo& device, const PlanOptions& options,
    int max_candidates = kMaxTuneCandidates);

/// Compiles, loads and times one plan on the device: microseconds per run, or the error.
using CudaTuneMeasure = std::function<Expected<double>(const CudaPlan&)>;
/// Monotonic milliseconds (injectable so tests check the bound without a clock).
using CudaTuneClock = std::function<double()>;

struct CudaTuneResult {
  std::unique_ptr<CudaPlan> winner;
  /// Plans timed, and milliseconds spent tuning (measurements included).
  int measured = 0;
  double spent_ms = 0;
  /// Microseconds of the model's plan and of the winner (0 when not measured).
  double model_us = 0, winner_us = 0;
  /// One line per candidate: "<kernel name> 123.4 us" or "... failed: <why>" or "... skipped".
  std::string log;
};

/// Times the candidates in order with `measure` until the budget would be exceeded: the next
/// one is skipped when the time spent plus the slowest measurement so far passes `budget_ms`.
/// The winner is the fastest measured plan; when every measurement failed it is the model's
/// plan (the error goes to the log, never to the caller: tuning only ever picks among valid
/// plans). `clock` defaults to std::chrono::steady_clock.
Expected<CudaTuneResult> tune_cuda_plan(const ConvProblem& problem, const CudaDeviceInfo& device,
                                        const PlanOptions& options, const CudaTuneMeasure& measure,
                                        double budget_ms = kTuneBudgetMs,
                                        CudaTuneClock clock = nullptr);

/// "tuned=4plans/812ms(model 120.0us, winner 98.0us)": the plan's one-line note.
std::string tuning_summary(const CudaTuneResult& result);

}  // namespace convjit::codegen
