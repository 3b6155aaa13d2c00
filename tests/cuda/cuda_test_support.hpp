// Helpers of the CUDA test programs: the interpret mode's backend, forced plans on a problem,
// and one interpreted run checked against the naive reference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "convjit/convjit.hpp"
#include "frontend/problem.hpp"

namespace convjit::testing {

/// The CUDA backend on the "cuda-interpret" device (fails the calling test when unavailable).
std::shared_ptr<const codegen::Backend> cuda_interpret_backend();

/// One compile-and-check job: a problem, the forced plan keys, the math mode.
struct CudaJob {
  ConvProblem problem;
  std::string label;   // the descriptor's text
  std::string forced;  // PlanOptions::forced
  MathMode math = MathMode::kExact;
  /// Every tensor starts one element past a 16-byte boundary (a view into a larger buffer).
  bool misaligned = false;
};

/// The forced plans that exercise every code path the generator has for `problem`:
/// each algorithm that applies, FFMA and tensor-core tiles, split-K factors and depthwise
/// blockings. `variant` picks among several choices so a sweep covers them all.
std::vector<CudaJob> forced_jobs(const ConvProblem& problem, const std::string& label, int variant);

/// Compiles `job` with the interpret backend and runs it on seeded random data against the
/// naive reference; with `repeat`, runs twice (blocks on several threads) and requires equal
/// bits. Returns the kernel's name in *kernel and an empty string on success, else what failed.
std::string run_interpreted_job(const CudaJob& job, std::uint64_t seed, bool repeat,
                                std::string* kernel);

/// Runs `jobs` on all cores; returns the failures (job label, forced keys, what failed).
std::vector<std::string> run_jobs_in_parallel(const std::vector<CudaJob>& jobs, std::uint64_t seed,
                                              int* kernels_run);

}  // namespace convjit::testing
