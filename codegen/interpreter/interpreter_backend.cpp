#include "codegen/interpreter/interpreter_backend.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "ir/interpreter.hpp"
#include "ir/pipeline.hpp"

namespace convjit::codegen {
namespace {

class InterpretedCode final : public CompiledCode {
 public:
  explicit InterpretedCode(ir::LoopNest nest)
      : nest_(std::move(nest)),
        name_("interp_" + (nest_.schedule_summary.empty() ? std::string("direct")
                                                          : nest_.schedule_summary)),
        scratch_bytes_(static_cast<std::size_t>(nest_.scratch_bytes())) {}

  Status run(const OperandPointers& operands, const RunContext& context) const override {
    return ir::interpret(nest_, operands,
                         context.parallel_for ? context.parallel_for : ParallelFor(serial_for));
  }
  const std::string& name() const override { return name_; }
  std::size_t scratch_bytes() const override { return scratch_bytes_; }

 private:
  ir::LoopNest nest_;
  std::string name_;
  std::size_t scratch_bytes_;
};

class InterpreterPlan final : public Plan {
 public:
  explicit InterpreterPlan(ir::Target target) : target(std::move(target)) {}
  std::string describe() const override {
    return fmt::format("target={} threads={}", target.name(), target.num_threads);
  }
  ir::Target target;
};

class InterpreterBackend final : public Backend {
 public:
  explicit InterpreterBackend(const ir::Target& target) : target_(target) {}

  std::string_view name() const override { return kInterpreterBackendName; }
  const std::string& device() const override { return device_; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  std::string target_name() const override { return target_.name(); }

  // The interpreter executes every construct of the IR.
  Expected<std::unique_ptr<const Plan>> plan(const ConvProblem&,
                                            const PlanOptions& options) const override {
    ir::Target target = target_;
    target.num_threads = std::max(1, options.num_threads);
    return std::unique_ptr<const Plan>(std::make_unique<InterpreterPlan>(target));
  }
  ir::LoopNest schedule(ir::LoopNest nest, const Plan& plan,
                        const ir::PassObserver& observer) const override {
    return ir::schedule(std::move(nest), static_cast<const InterpreterPlan&>(plan).target,
                        observer);
  }
  Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest& nest,
                                              const Plan&) const override {
    return std::unique_ptr<CompiledCode>(std::make_unique<InterpretedCode>(nest));
  }

 private:
  ir::Target target_;
  std::string device_ = "cpu";
};

}  // namespace

std::unique_ptr<Backend> make_interpreter_backend(const ir::Target& target) {
  return std::make_unique<InterpreterBackend>(target);
}

}  // namespace convjit::codegen
