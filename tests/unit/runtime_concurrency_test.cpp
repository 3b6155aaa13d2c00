// Concurrency: the pool under many callers, single-flight compiles, and many threads running
// one kernel. Kept in one file so the TSan build (CONVJIT_SANITIZE=thread) can run it alone:
//   convjit_unit_tests --gtest_filter='RuntimeConcurrency.*'
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "convjit/convjit.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/thread_pool.hpp"
#include "support/run_together.hpp"
#include "support/test_tensors.hpp"

namespace convjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;

using convjit::testing::run_together;

TEST(RuntimeConcurrency, PoolServesManyCallersAtOnce) {
  ThreadPool pool(4);
  constexpr int kCallers = 8;
  constexpr std::int64_t kN = 257;
  std::vector<std::vector<std::atomic<int>>> visits(kCallers);
  for (auto& v : visits) v = std::vector<std::atomic<int>>(kN);
  run_together(kCallers, [&](int caller) {
    for (int round = 0; round < 20; ++round) {
      pool.parallel_for(kN, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          // A nested loop from inside a body must neither deadlock nor lose work.
          pool.parallel_for(2, [&](std::int64_t b, std::int64_t e) {
            visits[static_cast<std::size_t>(caller)][static_cast<std::size_t>(i)] +=
                static_cast<int>(e - b);
          });
        }
      });
    }
  });
  for (auto& v : visits) {
    for (auto& count : v) ASSERT_EQ(count.load(), 20 * 2);
  }
}

TEST(RuntimeConcurrency, SixteenThreadsCompileOnce) {
  KernelCache cache(8);
  constexpr int kThreads = 16;
  std::atomic<int> compiles{0};
  auto compile = [&]() -> Expected<KernelCache::Entry> {
    ++compiles;
    // Hold the compile until every other thread is waiting on it (bounded, in case of a bug).
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (cache.stats().coalesced < kThreads - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto kernel = std::make_shared<CompiledKernel>();
    kernel->name = "only_one";
    return KernelCache::Entry(kernel);
  };
  std::vector<KernelCache::Entry> results(kThreads);
  run_together(kThreads, [&](int i) {
    auto result = cache.get_or_compile("same-key", compile);
    ASSERT_TRUE(result.has_value());
    results[static_cast<std::size_t>(i)] = result->kernel;
  });
  EXPECT_EQ(compiles.load(), 1);
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.coalesced, static_cast<std::uint64_t>(kThreads - 1));
}

TEST(RuntimeConcurrency, FailedCompileReachesEveryWaiter) {
  KernelCache cache(8);
  constexpr int kThreads = 16;
  std::atomic<int> compiles{0};
  auto compile = [&]() -> Expected<KernelCache::Entry> {
    ++compiles;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (cache.stats().coalesced < kThreads - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return internal_error("code generation failed");
  };
  std::atomic<int> failures{0};
  run_together(kThreads, [&](int) {
    auto result = cache.get_or_compile("bad-key", compile);
    if (!result.has_value() && result.status().code() == StatusCode::kInternal) ++failures;
  });
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(failures.load(), kThreads);
  EXPECT_EQ(cache.stats().size, 0u);
}

OpDescriptor backprop_input_descriptor() {
  OpDescriptor desc;
  desc.op = OpKind::kConv2DBackpropInput;
  desc.input = {2, 9, 7, 3};
  desc.filter = {3, 2, 3, 5};
  desc.out_backprop = {2, 5, 4, 5};
  desc.strides = {1, 2, 2, 1};
  desc.padding = Padding::kSame;
  return desc;
}

TEST(RuntimeConcurrency, ConcurrentCompilesOfOneDescriptorCompileOnce) {
  OpDescriptor desc = backprop_input_descriptor();
  desc.input = {1, 11, 13, 2};  // a problem no other test compiles
  desc.filter = {2, 3, 2, 3};
  desc.out_backprop = {1, 6, 7, 3};
  const CacheStats before = global_kernel_cache().stats();
  std::vector<Kernel> kernels(16);
  run_together(16, [&](int i) { kernels[static_cast<std::size_t>(i)] = compile(desc); });
  const CacheStats after = global_kernel_cache().stats();
  EXPECT_EQ(after.misses - before.misses, 1u);
  EXPECT_EQ((after.hits - before.hits) + (after.coalesced - before.coalesced), 15u);
  int compiled_here = 0;
  for (const Kernel& k : kernels) {
    EXPECT_EQ(k.name(), kernels[0].name());
    // "none": compiled now; "disk": a previous process's disk entry. Either way, one thread.
    if (k.cache_source() != "memory") ++compiled_here;
  }
  EXPECT_EQ(compiled_here, 1);
}

TEST(RuntimeConcurrency, ManyThreadsRunOneKernel) {
  const OpDescriptor desc = backprop_input_descriptor();
  const Kernel kernel = compile(desc);
  using convjit::testing::TestTensor;
  const TestTensor filter = convjit::testing::random_tensor(DType::kFloat32, kernel.operand_shape(0), 1);
  const TestTensor dy = convjit::testing::random_tensor(DType::kFloat32, kernel.operand_shape(1), 2);
  TestTensor want(DType::kFloat32, kernel.operand_shape(2));
  run_reference(desc, filter.view(), dy.view(), want.view());

  constexpr int kThreads = 8;
  std::vector<TestTensor> outputs;
  for (int i = 0; i < kThreads; ++i) outputs.emplace_back(DType::kFloat32, kernel.operand_shape(2));
  run_together(kThreads, [&](int i) {
    for (int round = 0; round < 5; ++round) {
      TestTensor& out = outputs[static_cast<std::size_t>(i)];
      out.fill(std::nan(""));
      kernel.run(filter.view(), dy.view(), out.view());
    }
  });
  for (const TestTensor& out : outputs) {
    EXPECT_TRUE(convjit::testing::all_close(out.view(), want.view(), convjit::testing::tolerance(DType::kFloat32, 30)));
  }
}

}  // namespace
}  // namespace convjit::runtime
