#include "codegen/cpu/cpu_plan.hpp"

#include <fmt/format.h>

#include "codegen/cpu/passes/cpu_pass_util.hpp"

namespace convjit::cpu {

std::string CpuPlan::describe() const {
  return fmt::format("cpu={} threads={}", cpu.name(), threads);
}

CpuPlan plan_cpu(const ConvProblem& problem, const CpuInfo& cpu, int max_threads) {
  CpuPlan plan;
  plan.cpu = cpu;
  plan.threads = useful_threads(problem, max_threads);
  return plan;
}

}  // namespace convjit::cpu
