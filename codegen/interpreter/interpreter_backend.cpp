#include "codegen/interpreter/interpreter_backend.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "ir/interpreter.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"

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

class InterpreterBackend final : public Backend {
 public:
  explicit InterpreterBackend(const cpu::CpuInfo& cpu) : cpu_(cpu) {}

  std::string_view name() const override { return kInterpreterBackendName; }
  const std::string& device() const override { return device_; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  std::string target_name() const override { return cpu_.name(); }

  // The interpreter executes every construct of the IR.
  Expected<std::unique_ptr<const Plan>> plan(const ConvProblem& problem,
                                            const PlanOptions& options) const override {
    return std::unique_ptr<const Plan>(
        std::make_unique<cpu::CpuPlan>(cpu::plan_cpu(problem, cpu_, options.num_threads)));
  }
  ir::LoopNest schedule(ir::LoopNest nest, const Plan& plan,
                        const ir::PassObserver& observer) const override {
    return cpu::schedule(std::move(nest), static_cast<const cpu::CpuPlan&>(plan), observer);
  }
  Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest& nest,
                                              const Plan&) const override {
    return std::unique_ptr<CompiledCode>(std::make_unique<InterpretedCode>(nest));
  }

 private:
  cpu::CpuInfo cpu_;
  std::string device_ = "cpu";
};

}  // namespace

std::unique_ptr<Backend> make_interpreter_backend(const cpu::CpuInfo& cpu) {
  return std::make_unique<InterpreterBackend>(cpu);
}

}  // namespace convjit::codegen
