// Rough single-thread speed of the x86 kernels on one mid-size layer (ResNet 3x3, 28x28,
// 128->128, batch 8, SAME), backprop data and filter in f32: printed, never asserted (timings
// belong to benchmarks). The result is still checked against a second run for determinism.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "codegen/x86/x86_backend.hpp"
#include "frontend/validate.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "support/test_tensors.hpp"

namespace convjit::codegen {
namespace {

using convjit::testing::TestTensor;

std::vector<std::int64_t> to_vec(const std::array<std::int64_t, 4>& a) { return {a.begin(), a.end()}; }

void time_problem(ConvDirection dir, cpu::Isa isa) {
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.input = {8, 28, 28, 128};
  d.filter = {3, 3, 128, 128};
  d.padding = Padding::kSame;
  Expected<ConvProblem> vp = validate(d);
  ASSERT_TRUE(vp.has_value());
  ConvProblem p = *vp;
  p.direction = dir;
  p.op = dir == ConvDirection::kBackpropData ? OpKind::kConv2DBackpropInput : OpKind::kConv2DBackpropFilter;

  const cpu::CpuInfo target = cpu::CpuInfo::host(isa);
  const auto t0 = std::chrono::steady_clock::now();
  const ir::LoopNest nest = cpu::lower_and_schedule(p, target, 1);
  auto code = x86::emit_nest(nest, target);
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(code.has_value()) << code.status().to_string();

  TestTensor x = convjit::testing::random_tensor(p.dtype, to_vec(p.shape(TensorRole::kX)), 1);
  TestTensor w = convjit::testing::random_tensor(p.dtype, to_vec(p.shape(TensorRole::kW)), 2);
  TestTensor y = convjit::testing::random_tensor(p.dtype, to_vec(p.shape(TensorRole::kY)), 3);
  const OperandPointers ops{x.data(), w.data(), y.data()};
  TestTensor& out = dir == ConvDirection::kBackpropData ? x : w;
  ASSERT_TRUE((*code)->run(ops, RunContext{}).is_ok());
  const TestTensor first = out;
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto s = std::chrono::steady_clock::now();
    ASSERT_TRUE((*code)->run(ops, RunContext{}).is_ok());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
  }
  EXPECT_EQ(std::memcmp(first.data(), out.data(), static_cast<std::size_t>(out.elements()) * 4), 0);
  std::printf("[x86 perf] %-44s %s 1 thread: %7.2f ms  %6.1f GFLOP/s  (compile %.1f ms, %zu code bytes)\n",
              (*code)->name().c_str(), target.name().c_str(), best * 1e3, p.flops() / best * 1e-9,
              compile_ms, (*code)->code_bytes().size());
}

TEST(X86Perf, PrintsSingleThreadGflopsForResnet3x3) {
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (cpu::CpuInfo::host(isa).isa != isa) continue;
    time_problem(ConvDirection::kBackpropData, isa);
    time_problem(ConvDirection::kBackpropFilter, isa);
  }
}

}  // namespace
}  // namespace convjit::codegen
