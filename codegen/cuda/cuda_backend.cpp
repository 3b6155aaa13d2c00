// The CUDA backend: plan (cuda_plan.cpp), generate (cuda_source.cpp), compile (NVRTC for a GPU;
// the interpret mode builds the same body for the host), load and run through the executor.
#include "codegen/cuda/cuda_backend.hpp"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "codegen/cuda/cuda_tune.hpp"

namespace convjit::codegen {
namespace {

std::vector<std::uint8_t> bytes_of(std::string_view text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

std::string text_of(const Artifacts& artifacts, const char* name) {
  const auto it = artifacts.find(name);
  if (it == artifacts.end()) return {};
  return std::string(it->second.begin(), it->second.end());
}

class CudaCode final : public CompiledCode {
 public:
  CudaCode(CudaProgram program, CudaBinary binary, std::shared_ptr<const CudaModule> module,
           Artifacts executor_artifacts)
      : program_(std::move(program)),
        binary_(std::move(binary)),
        module_(std::move(module)),
        executor_artifacts_(std::move(executor_artifacts)) {}

  Status run(const OperandPointers& operands, const RunContext& context) const override {
    return module_->run(program_, operands, context);
  }
  const std::string& name() const override { return program_.kernel_name; }
  std::size_t scratch_bytes() const override { return 0; }
  std::size_t workspace_bytes() const override { return program_.workspace_bytes; }
  std::size_t resident_bytes() const override {
    return program_.body.size() + binary_.cubin.size() + module_->resident_bytes();
  }
  Artifacts artifacts() const override {
    Artifacts a = executor_artifacts_;
    a[kCudaSourceArtifact] = bytes_of(program_.body);
    a[kCudaLaunchArtifact] = bytes_of(launches_to_text(program_));
    if (!binary_.cubin.empty()) {
      a[kCudaCubinArtifact] = binary_.cubin;
      a[kCudaPtxArtifact] = bytes_of(binary_.ptx);
      a[kCudaResourcesArtifact] = bytes_of(resources_to_text(binary_.kernels));
    }
    return a;
  }

  const CudaProgram& program() const { return program_; }
  const CudaBinary& binary() const { return binary_; }
  const CudaModule& module() const { return *module_; }

 private:
  CudaProgram program_;
  CudaBinary binary_;
  std::shared_ptr<const CudaModule> module_;
  Artifacts executor_artifacts_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::shared_ptr<const CudaExecutor> executor)
      : executor_(std::move(executor)), target_(executor_->target_name()) {}

  std::string_view name() const override { return kCudaBackendName; }
  const std::string& device() const override { return executor_->device(); }
  MemorySpace memory_space() const override { return executor_->memory_space(); }
  std::string target_name() const override { return target_; }

  Expected<std::unique_ptr<const Plan>> plan(const ConvProblem& problem,
                                             const PlanOptions& options) const override {
    if (options.tune && options.forced.empty()) return tuned_plan(problem, options);
    Expected<std::unique_ptr<CudaPlan>> plan =
        make_cuda_plan(problem, executor_->device_info(), options);
    if (!plan) return plan.status();
    return std::unique_ptr<const Plan>(std::move(plan).value());
  }

  // The CUDA generators work from the plan's ConvProblem (the implicit-GEMM view and the
  // residue classes are theirs); the loop nest passes through unchanged.
  ir::LoopNest schedule(ir::LoopNest nest, const Plan&, const ir::PassObserver&) const override {
    return nest;
  }

  Expected<std::unique_ptr<CompiledCode>> emit(const ir::LoopNest&,
                                               const Plan& plan) const override {
    Expected<std::unique_ptr<CudaCode>> code = build(static_cast<const CudaPlan&>(plan));
    if (!code) return code.status();
    return std::unique_ptr<CompiledCode>(std::move(code).value());
  }

  Expected<std::unique_ptr<CompiledCode>> load(const Artifacts& artifacts) const override {
    Expected<CudaProgram> program = launches_from_text(text_of(artifacts, kCudaLaunchArtifact));
    if (!program) return program.status();
    program->body = text_of(artifacts, kCudaSourceArtifact);
    CudaBinary binary;
    if (const auto it = artifacts.find(kCudaCubinArtifact); it != artifacts.end()) {
      binary.cubin = it->second;
      binary.arch = executor_->device_info().arch_name();
      binary.ptx = text_of(artifacts, kCudaPtxArtifact);
      binary.kernels = resources_from_text(text_of(artifacts, kCudaResourcesArtifact));
    }
    if (executor_->needs_cubin() && binary.cubin.empty() && !program->launches.empty()) {
      return invalid_argument("stored CUDA code has no cubin");
    }
    Expected<std::shared_ptr<const CudaModule>> module =
        executor_->load_stored(*program, artifacts);
    if (!module) return module.status();
    Artifacts executor_artifacts;
    for (const auto& [name, bytes] : artifacts) {
      if (name != kCudaSourceArtifact && name != kCudaLaunchArtifact &&
          name != kCudaCubinArtifact && name != kCudaPtxArtifact &&
          name != kCudaResourcesArtifact) {
        executor_artifacts[name] = bytes;
      }
    }
    return std::unique_ptr<CompiledCode>(
        std::make_unique<CudaCode>(std::move(program).value(), std::move(binary),
                                   std::move(module).value(), std::move(executor_artifacts)));
  }

 private:
  // Generates, compiles (NVRTC for a GPU) and loads the program of `cuda_plan`.
  Expected<std::unique_ptr<CudaCode>> build(const CudaPlan& cuda_plan) const {
    Expected<CudaProgram> program = generate_cuda_program(cuda_plan);
    if (!program) return program.status();
    CudaBinary binary;
    if (executor_->needs_cubin() && !program->launches.empty()) {
      Expected<const NvrtcCompiler*> nvrtc = NvrtcCompiler::get();
      if (!nvrtc) return nvrtc.status();
      Expected<CudaBinary> compiled = (*nvrtc)->compile(
          nvrtc_translation_unit(*program), program->kernel_name, executor_->device_info());
      if (!compiled) return compiled.status();
      binary = std::move(compiled).value();
    }
    Artifacts executor_artifacts;
    Expected<std::shared_ptr<const CudaModule>> module = executor_->load(
        *program, executor_->needs_cubin() ? &binary : nullptr, &executor_artifacts);
    if (!module) return module.status();
    return std::make_unique<CudaCode>(std::move(program).value(), std::move(binary),
                                      std::move(module).value(), std::move(executor_artifacts));
  }

  // CONVJIT_CUDA_TUNE: the plan model's candidates, each built and timed once on the device
  // (cuda_tune.hpp), the fastest kept. Where the executor cannot time (the interpret mode) the
  // model's plan stands, and says so.
  Expected<std::unique_ptr<const Plan>> tuned_plan(const ConvProblem& problem,
                                                   const PlanOptions& options) const {
    if (!executor_->can_time()) {
      Expected<std::unique_ptr<CudaPlan>> plan =
          make_cuda_plan(problem, executor_->device_info(), options);
      if (!plan) return plan.status();
      (*plan)->tuning = "tuning=none(" + executor_->device() + " cannot time kernels)";
      return std::unique_ptr<const Plan>(std::move(plan).value());
    }
    const CudaTuneMeasure measure = [&](const CudaPlan& candidate) -> Expected<double> {
      Expected<std::unique_ptr<CudaCode>> code = build(candidate);
      if (!code) return code.status();
      return executor_->time_program_us((*code)->module(), (*code)->program());
    };
    Expected<CudaTuneResult> tuned =
        tune_cuda_plan(problem, executor_->device_info(), options, measure);
    if (!tuned) return tuned.status();
    tuned->winner->tuning = tuning_summary(*tuned);
    return std::unique_ptr<const Plan>(std::move(tuned->winner));
  }

  std::shared_ptr<const CudaExecutor> executor_;
  std::string target_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const CudaExecutor> executor) {
  return std::make_unique<CudaBackend>(std::move(executor));
}

CudaCodeInfo cuda_code_info(const CompiledCode& code) {
  const auto* cuda = dynamic_cast<const CudaCode*>(&code);
  if (cuda == nullptr) return {};
  return {&cuda->program(), cuda->binary().cubin.empty() ? nullptr : &cuda->binary()};
}

Expected<CudaCompileReport> compile_cuda_for_target(const ConvProblem& problem,
                                                    const CudaDeviceInfo& device,
                                                    const PlanOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<CudaPlan>> plan = make_cuda_plan(problem, device, options);
  if (!plan) return plan.status();
  Expected<CudaProgram> program = generate_cuda_program(**plan);
  if (!program) return program.status();
  CudaCompileReport report;
  report.plan_text = (*plan)->describe();
  report.generate_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Expected<const NvrtcCompiler*> nvrtc = NvrtcCompiler::get();
  if (!nvrtc) return nvrtc.status();
  report.nvrtc_version = (*nvrtc)->version();
  Expected<CudaBinary> binary =
      (*nvrtc)->compile(nvrtc_translation_unit(*program), program->kernel_name, device);
  if (!binary) return binary.status();
  report.program = std::move(program).value();
  report.binary = std::move(binary).value();
  return report;
}

}  // namespace convjit::codegen
