#include "codegen/interpreter/interpreter_backend.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "ir/interpreter.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::codegen {
namespace {

// The interpreter decides nothing: its schedule is the same for every problem.
class InterpreterPlan final : public Plan {
 public:
  std::string describe() const override { return "interpreter: lowered nest, residues, borders"; }
};

// The interpreter's schedule: only the transformations that hold for every target, so what it
// runs is the lowered op with its stride divisions and border guards resolved, nothing a CPU
// schedule chose. It is the oracle the other backends are checked against.
const std::vector<ir::NamedPass<InterpreterPlan>>& interpreter_passes() {
  static const std::vector<ir::NamedPass<InterpreterPlan>> kPasses = {
      {"stride_residue_split", [](ir::LoopNest n, const InterpreterPlan&) {
         return ir::stride_residue_split(std::move(n));
       }},
      {"border_peel",
       [](ir::LoopNest n, const InterpreterPlan&) { return ir::border_peel(std::move(n)); }},
  };
  return kPasses;
}

class InterpretedCode final : public CompiledCode {
 public:
  explicit InterpretedCode(ir::LoopNest nest)
      : nest_(std::move(nest)),
        name_(fmt::format("interp_{}_{}_{}", dtype_name(nest_.problem.dtype),
                          direction_name(nest_.problem.direction),
                          data_format_name(nest_.problem.format))),
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

class InterpreterBackend final : public Backend {
 public:
  InterpreterBackend() = default;

  std::string_view name() const override { return kInterpreterBackendName; }
  const std::string& device() const override { return device_; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  std::string target_name() const override { return "generic"; }

  // The interpreter executes every construct of the IR.
  Expected<std::unique_ptr<const Plan>> plan(const ConvProblem&,
                                            const PlanOptions&) const override {
    return std::unique_ptr<const Plan>(std::make_unique<InterpreterPlan>());
  }
  ir::LoopNest schedule(ir::LoopNest nest, const Plan& plan,
                        const ir::PassObserver& observer) const override {
    return ir::run_passes(std::move(nest), interpreter_passes(),
                          static_cast<const InterpreterPlan&>(plan), observer);
  }
  Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest& nest,
                                              const Plan&) const override {
    return std::unique_ptr<CompiledCode>(std::make_unique<InterpretedCode>(nest));
  }

 private:
  std::string device_ = "cpu";
};

}  // namespace

std::unique_ptr<Backend> make_interpreter_backend() {
  return std::make_unique<InterpreterBackend>();
}

}  // namespace convjit::codegen
