// CpuPlan: every decision the CPU schedule carries out for one problem on one core type, made in
// one place (plan_cpu) before lowering. The passes of cpu_pipeline.cpp read it and decide
// nothing themselves.
#pragma once

#include <string>

#include "codegen/backend.hpp"
#include "codegen/cpu/cpu_info.hpp"
#include "frontend/problem.hpp"

namespace convjit::cpu {

struct CpuPlan final : codegen::Plan {
  /// The core the kernel is planned for.
  CpuInfo cpu;
  /// Threads worth using: the caller's count, or 1 where waking the pool costs more than it
  /// saves (small problems).
  int threads = 1;

  std::string describe() const override;
};

/// The plan for `problem` on `cpu` with up to `max_threads` threads.
CpuPlan plan_cpu(const ConvProblem& problem, const CpuInfo& cpu, int max_threads);

}  // namespace convjit::cpu
