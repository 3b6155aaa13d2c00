// Bounded autotuning (CONVJIT_CUDA_TUNE=1) without a GPU: the candidate plans the model
// proposes, the choice of the fastest, the time bound (with an injected clock), the cache key,
// and the backend's tuned plan stored as artifacts and reloaded without tuning again (with an
// executor whose timer is injected; the interpret mode builds and loads the candidates).
#ifdef CONVJIT_HAVE_CUDA

#include "codegen/cuda/cuda_tune.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "frontend/validate.hpp"
#include "runtime/cuda/interpret/interpret_executor.hpp"
#include "runtime/env.hpp"

namespace convjit::codegen {
namespace {

OpDescriptor conv(OpKind op, DType dtype, std::int64_t n, std::int64_t size, std::int64_t c,
                  std::int64_t m, std::int64_t stride = 1) {
  OpDescriptor d;
  d.op = op;
  d.dtype = dtype;
  const bool dw = op == OpKind::kDepthwiseConv2dNativeBackpropInput ||
                  op == OpKind::kDepthwiseConv2dNativeBackpropFilter;
  const std::int64_t out = (size + stride - 1) / stride;
  d.input = {n, size, size, c};
  d.filter = {3, 3, c, m};
  d.out_backprop = {n, out, out, dw ? c * m : m};
  d.strides = {1, stride, stride, 1};
  d.padding = Padding::kSame;
  return d;
}

ConvProblem problem_of(const OpDescriptor& d) {
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  return p.has_value() ? *p : ConvProblem{};
}

CudaDeviceInfo arch(const char* name) {
  Expected<CudaDeviceInfo> info = known_cuda_target(name);
  EXPECT_TRUE(info.has_value());
  return info.has_value() ? *info : CudaDeviceInfo{};
}

TEST(CudaTune, CandidatesAreTheModelsPlanThenDistinctValidVariants) {
  const std::vector<std::pair<OpDescriptor, const char*>> cases = {
      {conv(OpKind::kConv2DBackpropInput, DType::kFloat32, 8, 28, 64, 64, 2), "sm_80"},
      {conv(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 32, 28, 64, 64), "sm_90"},
      {conv(OpKind::kConv2DBackpropFilter, DType::kFloat32, 32, 14, 128, 128), "sm_80"},
      {conv(OpKind::kConv2DBackpropInput, DType::kHalf, 16, 14, 256, 256), "sm_80"},
      {conv(OpKind::kDepthwiseConv2dNativeBackpropInput, DType::kFloat32, 8, 56, 96, 1), "sm_80"},
      {conv(OpKind::kDepthwiseConv2dNativeBackpropFilter, DType::kHalf, 8, 28, 144, 2), "sm_90"},
  };
  for (const auto& [desc, target] : cases) {
    const ConvProblem problem = problem_of(desc);
    PlanOptions options;
    Expected<std::vector<CudaTuneCandidate>> c =
        cuda_tune_candidates(problem, arch(target), options);
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    Expected<std::unique_ptr<CudaPlan>> model = make_cuda_plan(problem, arch(target), options);
    ASSERT_TRUE(model.has_value());
    SCOPED_TRACE((*model)->kernel_name);
    ASSERT_GE(c->size(), 3u) << "a GEMM or depthwise problem has variants to try";
    EXPECT_LE(c->size(), static_cast<std::size_t>(kMaxTuneCandidates));
    EXPECT_EQ((*c)[0].forced, "");
    EXPECT_EQ((*c)[0].plan->kernel_name, (*model)->kernel_name);
    std::set<std::string> names;
    for (const CudaTuneCandidate& candidate : *c) {
      EXPECT_TRUE(names.insert(candidate.plan->kernel_name).second) << candidate.forced;
      // Each variant is what its forced text plans (the disk cache could replay it).
      PlanOptions forced = options;
      forced.forced = candidate.forced;
      Expected<std::unique_ptr<CudaPlan>> again = make_cuda_plan(problem, arch(target), forced);
      ASSERT_TRUE(again.has_value()) << candidate.forced;
      EXPECT_EQ((*again)->kernel_name, candidate.plan->kernel_name);
    }
  }
  // A caller-forced plan and the direct kernel are not tuned.
  PlanOptions forced;
  forced.forced = "algo=direct";
  const ConvProblem p = problem_of(conv(OpKind::kConv2DBackpropInput, DType::kFloat32, 2, 8, 4, 4));
  EXPECT_EQ(cuda_tune_candidates(p, arch("sm_80"), forced)->size(), 1u);
}

TEST(CudaTune, KeepsTheFastestAndStaysWithinTheBudget) {
  const ConvProblem problem =
      problem_of(conv(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 32, 28, 64, 64));
  const CudaDeviceInfo device = arch("sm_80");
  Expected<std::vector<CudaTuneCandidate>> c = cuda_tune_candidates(problem, device, {});
  ASSERT_TRUE(c.has_value());
  ASSERT_GE(c->size(), 3u);
  // The third candidate is the fastest.
  std::map<std::string, double> us;
  for (std::size_t i = 0; i < c->size(); ++i) us[(*c)[i].plan->kernel_name] = i == 2 ? 10 : 50 + i;
  double now = 0;
  int calls = 0;
  CudaTuneMeasure measure = [&](const CudaPlan& plan) -> Expected<double> {
    ++calls;
    now += 100;  // each compile + timing takes 100 ms of the injected clock
    return us.at(plan.kernel_name);
  };
  Expected<CudaTuneResult> r =
      tune_cuda_plan(problem, device, {}, measure, 2000, [&] { return now; });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->winner->kernel_name, (*c)[2].plan->kernel_name);
  EXPECT_EQ(r->measured, static_cast<int>(c->size()));
  EXPECT_DOUBLE_EQ(r->model_us, 50);
  EXPECT_DOUBLE_EQ(r->winner_us, 10);
  EXPECT_NE(tuning_summary(*r).find("winner 10.0us"), std::string::npos) << tuning_summary(*r);

  // 700 ms per candidate in a 2000 ms budget: the model's plan and one more (a third would end
  // at 2100 ms); the rest are skipped and logged.
  now = 0;
  calls = 0;
  measure = [&](const CudaPlan& plan) -> Expected<double> {
    ++calls;
    now += 700;
    return us.at(plan.kernel_name);
  };
  r = tune_cuda_plan(problem, device, {}, measure, 2000, [&] { return now; });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r->measured, 2);
  EXPECT_LE(r->spent_ms, 2000);
  EXPECT_NE(r->log.find("skipped"), std::string::npos) << r->log;
  EXPECT_EQ(r->winner->kernel_name, (*c)[0].plan->kernel_name);  // 50 us beats 51

  // Every measurement failing leaves the model's plan, the reasons in the log.
  measure = [&](const CudaPlan&) -> Expected<double> {
    return Status(StatusCode::kUnavailable, "launch failed");
  };
  r = tune_cuda_plan(problem, device, {}, measure);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->winner->kernel_name, (*c)[0].plan->kernel_name);
  EXPECT_NE(r->log.find("failed: launch failed"), std::string::npos) << r->log;
}

TEST(CudaTune, TuningIsPartOfTheCacheKeyAndTheEnvironment) {
  PlanOptions options;
  EXPECT_EQ(options_key(options).find("tune"), std::string::npos);
  options.tune = true;
  EXPECT_NE(options_key(options).find("tune=1"), std::string::npos);
  std::vector<std::string> warnings;
  auto env = [](const char* value) {
    return [value](const char* name) -> const char* {
      return std::string(name) == "CONVJIT_CUDA_TUNE" ? value : nullptr;
    };
  };
  EXPECT_TRUE(runtime::parse_env(env("1"), &warnings).cuda_tune);
  EXPECT_FALSE(runtime::parse_env(env("0"), &warnings).cuda_tune);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(runtime::parse_env(env("yes please"), &warnings).cuda_tune);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("CONVJIT_CUDA_TUNE"), std::string::npos) << warnings[0];
}

// The interpret mode's executor with an injected timer: candidates are really generated, built
// and loaded; only the clock is fake. Prefers the kernel named `fastest`.
class TimedExecutor final : public CudaExecutor {
 public:
  TimedExecutor(std::shared_ptr<const CudaExecutor> inner, std::string fastest)
      : inner_(std::move(inner)), fastest_(std::move(fastest)) {}
  const std::string& device() const override { return inner_->device(); }
  MemorySpace memory_space() const override { return inner_->memory_space(); }
  const CudaDeviceInfo& device_info() const override { return inner_->device_info(); }
  std::string target_name() const override { return inner_->target_name(); }
  bool needs_cubin() const override { return inner_->needs_cubin(); }
  Expected<std::shared_ptr<const CudaModule>> load(const CudaProgram& program,
                                                   const CudaBinary* binary,
                                                   Artifacts* artifacts) const override {
    return inner_->load(program, binary, artifacts);
  }
  Expected<std::shared_ptr<const CudaModule>> load_stored(
      const CudaProgram& program, const Artifacts& artifacts) const override {
    return inner_->load_stored(program, artifacts);
  }
  bool can_time() const override { return true; }
  Expected<double> time_program_us(const CudaModule&, const CudaProgram& program) const override {
    timed.push_back(program.kernel_name);
    return program.kernel_name == fastest_ ? 5.0 : 20.0;
  }
  mutable std::vector<std::string> timed;

 private:
  std::shared_ptr<const CudaExecutor> inner_;
  std::string fastest_;
};

TEST(CudaTune, BackendKeepsTheWinnerAndItsStoredCodeReloadsWithoutTuning) {
  Expected<std::shared_ptr<const CudaExecutor>> interpret =
      runtime::interpret::make_interpret_executor();
  if (!interpret) GTEST_SKIP() << "no host C++ compiler: " << interpret.status().message();
  const ConvProblem problem =
      problem_of(conv(OpKind::kDepthwiseConv2dNativeBackpropInput, DType::kFloat32, 1, 6, 8, 1));
  PlanOptions options;
  options.tune = true;
  Expected<std::vector<CudaTuneCandidate>> c =
      cuda_tune_candidates(problem, (*interpret)->device_info(), options);
  ASSERT_TRUE(c.has_value());
  ASSERT_GE(c->size(), 2u);
  const std::string fastest = c->back().plan->kernel_name;
  auto executor = std::make_shared<TimedExecutor>(*interpret, fastest);
  std::unique_ptr<Backend> backend = make_cuda_backend(executor);

  Expected<std::unique_ptr<CompiledCode>> code = compile(*backend, problem, options);
  ASSERT_TRUE(code.has_value()) << code.status().to_string();
  EXPECT_EQ((*code)->name(), fastest);
  EXPECT_EQ(executor->timed.size(), c->size());  // each candidate timed once

  // What the disk cache stores reloads as the winner, with no candidate timed again.
  Expected<std::unique_ptr<CompiledCode>> reloaded = backend->load((*code)->artifacts());
  ASSERT_TRUE(reloaded.has_value()) << reloaded.status().to_string();
  EXPECT_EQ((*reloaded)->name(), fastest);
  EXPECT_EQ(executor->timed.size(), c->size());

  // Without a timer (the plain interpret mode) the model's plan stands and says why.
  std::unique_ptr<Backend> plain = make_cuda_backend(*interpret);
  Expected<std::unique_ptr<const Plan>> plan = plain->plan(problem, options);
  ASSERT_TRUE(plan.has_value());
  EXPECT_NE((*plan)->describe().find("cannot time kernels"), std::string::npos)
      << (*plan)->describe();
  EXPECT_EQ(static_cast<const CudaPlan&>(**plan).kernel_name, (*c)[0].plan->kernel_name);
}

}  // namespace
}  // namespace convjit::codegen

#endif  // CONVJIT_HAVE_CUDA
