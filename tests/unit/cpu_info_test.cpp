// CpuInfo (the host's vector ISA, capped) and the thread count a CpuPlan keeps.
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_info.hpp"
#include "codegen/cpu/cpu_plan.hpp"
#include "frontend/validate.hpp"

namespace convjit::cpu {
namespace {

TEST(CpuInfo, GenericHostAndCappedTargets) {
  const CpuInfo g = CpuInfo::generic();
  EXPECT_EQ(g.name(), "generic");
  EXPECT_EQ(g.lanes(4), 1);
  const CpuInfo capped = CpuInfo::host(Isa::kGeneric);
  EXPECT_EQ(capped.isa, Isa::kGeneric);
  const CpuInfo host = CpuInfo::host(Isa::kAvx512);
  if (host.isa == Isa::kAvx512) {
    EXPECT_EQ(host.lanes(4), 16);
    EXPECT_EQ(host.vector_registers, 32);
    EXPECT_EQ(host.name().rfind("avx512", 0), 0u);
  }
  const CpuInfo avx2 = CpuInfo::host(Isa::kAvx2);
  EXPECT_NE(avx2.isa, Isa::kAvx512);
  if (avx2.isa == Isa::kAvx2) EXPECT_EQ(avx2.lanes(8), 4);
}

TEST(CpuInfo, PlanKeepsTheThreadsAProblemCanUse) {
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.input = {8, 28, 28, 64};
  d.filter = {3, 3, 64, 64};
  d.padding = Padding::kSame;
  const Expected<ConvProblem> big = validate(d);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(plan_cpu(*big, CpuInfo::generic(), 3).threads, 3);
  d.input = {1, 2, 2, 1};
  d.filter = {1, 1, 1, 1};
  const Expected<ConvProblem> tiny = validate(d);
  ASSERT_TRUE(tiny.has_value());
  // Waking the pool costs more than a 4-FLOP problem saves.
  EXPECT_EQ(plan_cpu(*tiny, CpuInfo::generic(), 3).threads, 1);
}

}  // namespace
}  // namespace convjit::cpu
