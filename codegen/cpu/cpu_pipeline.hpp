// The CPU schedule: the pass list a lowered LoopNest goes through for a CpuPlan, in order.
#pragma once

#include <vector>

#include "codegen/cpu/cpu_plan.hpp"
#include "frontend/problem.hpp"
#include "ir/ir.hpp"
#include "ir/pass.hpp"

namespace convjit::cpu {

/// The passes that carry `plan` out, in the order they run.
std::vector<ir::NamedPass<CpuPlan>> cpu_passes(const CpuPlan& plan);

/// Every pass of cpu_passes(plan) over a lowered nest.
ir::LoopNest schedule(ir::LoopNest nest, const CpuPlan& plan,
                      const ir::PassObserver& observer = {});

/// plan_cpu(), lower() and schedule() in one call (tests, tools).
ir::LoopNest lower_and_schedule(const ConvProblem& problem, const CpuInfo& cpu, int threads,
                                const ir::PassObserver& observer = {});

}  // namespace convjit::cpu
