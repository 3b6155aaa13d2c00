#include "codegen/backend.hpp"

#include <utility>

#include <fmt/format.h>

#include "ir/lower.hpp"
#include "ir/printer.hpp"

namespace convjit::codegen {

std::string options_key(const PlanOptions& options) {
  std::string key = fmt::format("threads={}", options.num_threads);
  if (options.math_mode == MathMode::kTF32) key += "\nmath=tf32";
  if (!options.deterministic) key += "\ndeterministic=0";
  if (options.tune) key += "\ntune=1";
  if (!options.forced.empty()) key += "\nforced=" + options.forced;
  return key;
}

Expected<std::unique_ptr<CompiledCode>> Backend::load(const Artifacts& artifacts) const {
  (void)artifacts;
  return unimplemented("backend '" + std::string(name()) + "' cannot load stored code");
}

Expected<std::unique_ptr<CompiledCode>> compile(const Backend& backend, const ConvProblem& problem,
                                                const PlanOptions& options,
                                                const CompileTrace& trace) {
  Expected<std::unique_ptr<const Plan>> plan = backend.plan(problem, options);
  if (!plan.has_value()) return plan.status();
  if (trace.plan_observer) trace.plan_observer(plan.value()->describe());
  ir::LoopNest nest = ir::lower(problem);
  if (trace.observer) trace.observer("lower", nest);
  nest = backend.schedule(std::move(nest), *plan.value(), trace.observer);
  if (trace.plan_text != nullptr) *trace.plan_text = plan.value()->describe();
  if (trace.ir_text != nullptr) *trace.ir_text = ir::print(nest);
  return backend.emit(nest, *plan.value());
}

}  // namespace convjit::codegen
