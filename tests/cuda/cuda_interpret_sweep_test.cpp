// Every CUDA sweep case runs in the interpret mode against the naive reference: the default plan
// through the public API (device "cuda-interpret"), and forced plans through every algorithm,
// FFMA and tensor-core tile, split-K factor and depthwise blocking the generator has. Any
// bounds, race or uninitialised-read report of the interpreter fails the case. Filter gradients
// run twice and must give the same bits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "convjit/convjit.hpp"
#include "cuda/cuda_test_support.hpp"
#include "frontend/validate.hpp"
#include "support/sweep_cases.hpp"
#include "support/test_tensors.hpp"

namespace convjit::testing {
namespace {

constexpr int kReported = 10;

void report(const std::vector<std::string>& failures, std::size_t total) {
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), kReported); ++i) {
    ADD_FAILURE() << failures[i];
  }
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << total << " cases failed";
}

// The default plans, through the public API exactly as a user runs them (cases spread over the
// machine's cores: compile() and run() are thread-safe).
TEST(CudaInterpretSweep, DefaultPlansMatchReference) {
  const std::vector<SweepCase> cases = sweep_cases();
  std::vector<std::string> failures;
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < cases.size(); i = next++) {
      const SweepCase& s = cases[i];
      const ConvCase& c = s.geometry;
      const OpDescriptor desc = c.descriptor(s.op);
      const auto shapes = c.operand_shapes(s.op);
      const std::uint64_t seed = 5000 + 7 * i;
      const TestTensor a = random_tensor(c.dtype, shapes[0], seed);
      const TestTensor b = random_tensor(c.dtype, shapes[1], seed + 1);
      TestTensor got(c.dtype, shapes[2]);
      got.fill(std::numeric_limits<double>::quiet_NaN());
      TestTensor want(c.dtype, shapes[2]);
      std::string problem;
      try {
        CompileOptions options;
        options.device = "cuda-interpret";
        options.num_threads = 1;
        const Kernel kernel = compile(desc, options);
        if (kernel.backend() != "cuda" || kernel.device() != "cuda-interpret") {
          problem = fmt::format("compiled by {} on {}", kernel.backend(), kernel.device());
        } else {
          kernel.run(a.view(), b.view(), got.view());
          run_reference(desc, a.view(), b.view(), want.view());
          const ::testing::AssertionResult close =
              all_close(got.view(), want.view(), tolerance(c.dtype, c.reduction_length(s.op)));
          if (!close) problem = close.message();
        }
      } catch (const Error& e) {
        problem = e.what();
      }
      if (problem.empty()) continue;
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back(fmt::format("{}: {}", to_text(desc), problem));
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
    threads.emplace_back(worker);
  }
  for (std::thread& t : threads) t.join();
  report(failures, cases.size());
  std::printf("[   SWEEP  ] cuda-interpret default plans: %zu cases, %zu failed\n", cases.size(),
              failures.size());
}

// Forced plans: every algorithm and tile on a third of the cases, rotating the variants.
TEST(CudaInterpretSweep, ForcedPlansMatchReference) {
  std::vector<CudaJob> jobs;
  int index = 0;
  for (const SweepCase& s : sweep_cases()) {
    if (s.empty || index++ % 3 != 0) continue;
    Expected<ConvProblem> p = validate(s.geometry.descriptor(s.op));
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    for (CudaJob& job : forced_jobs(*p, to_text(s.geometry.descriptor(s.op)), index / 3)) {
      jobs.push_back(std::move(job));
    }
  }
  int ran = 0;
  const std::vector<std::string> failures = run_jobs_in_parallel(jobs, 9000, &ran);
  report(failures, jobs.size());
  EXPECT_EQ(ran, static_cast<int>(jobs.size()));
  std::printf("[   SWEEP  ] cuda-interpret forced plans: %zu kernels, %zu failed\n", jobs.size(),
              failures.size());
}

}  // namespace
}  // namespace convjit::testing
