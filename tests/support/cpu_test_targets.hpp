// CPU schedule tests: a core and a thread count in one value, and the plan-making shortcuts the
// pass tests use (a pass called alone runs with the plan for its nest's problem).
#pragma once

#include <utility>

#include "codegen/cpu/cpu_info.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "codegen/cpu/cpu_plan.hpp"
#include "ir/ir.hpp"
#include "ir/pass.hpp"

namespace convjit::cpu::testing {

/// A core as CpuInfo describes it, plus the threads a test schedules for.
struct TestTarget : CpuInfo {
  int num_threads = 1;
};

/// The scalar core with `threads` threads.
inline TestTarget generic_target(int threads = 1) {
  TestTarget t;
  static_cast<CpuInfo&>(t) = CpuInfo::generic();
  t.num_threads = threads;
  return t;
}

/// The host's core capped at `isa`, with `threads` threads.
inline TestTarget host_target(Isa isa, int threads = 1) {
  TestTarget t;
  static_cast<CpuInfo&>(t) = CpuInfo::host(isa);
  t.num_threads = threads;
  return t;
}

/// An AVX-512 core with avx512_bf16 (whatever the host) and the AMX Xeon's caches (48 KiB L1d,
/// 2 MiB L2), with `threads` threads: with AMX (bfloat16 gradients on tiles), or without,
/// running vdpbf16ps faster than its FMAs (Zen 4, 5). Its plans are checked on any machine.
inline TestTarget avx512_bf16_target(bool amx, int threads = 1) {
  TestTarget t = generic_target(threads);
  t.isa = Isa::kAvx512;
  t.vector_bytes = 64;
  t.vector_registers = 32;
  t.has_fma = t.has_f16c = t.has_avx512_bf16 = true;
  t.has_amx_bf16 = amx;
  t.bf16_dot_beats_fma = !amx;
  t.l1_bytes = 48 << 10;
  t.l2_bytes = 2 << 20;
  return t;
}

/// The plan for `problem` on `target`.
inline CpuPlan plan_for(const ConvProblem& problem, const TestTarget& target) {
  return plan_cpu(problem, target, target.num_threads);
}

/// The whole CPU pipeline for `problem` on `target`.
inline ir::LoopNest lower_and_schedule(const ConvProblem& problem, const TestTarget& target,
                                       const ir::PassObserver& observer = {}) {
  return cpu::lower_and_schedule(problem, target, target.num_threads, observer);
}

/// One CPU pass on `nest`, carrying out the plan for the nest's problem on `target`.
inline ir::LoopNest run(ir::LoopNest (*pass)(ir::LoopNest, const CpuPlan&), ir::LoopNest nest,
                        const TestTarget& target) {
  const CpuPlan plan = plan_for(nest.problem, target);
  return pass(std::move(nest), plan);
}

}  // namespace convjit::cpu::testing
