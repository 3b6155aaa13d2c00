// CONVJIT_CUDA_TUNE may pick any candidate plan the model proposes, so each must compute the
// op: every candidate of small problems of each kernel family (FFMA and tensor-core GEMMs,
// strided input gradients, split-K filter gradients, depthwise gradients with multipliers)
// runs in the interpret mode against the naive reference, with the interpreter's bounds, race
// and uninitialised-read checks.
#ifdef CONVJIT_HAVE_CUDA

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_device_info.hpp"
#include "codegen/cuda/cuda_tune.hpp"
#include "cuda/cuda_test_support.hpp"
#include "frontend/validate.hpp"

namespace convjit::testing {
namespace {

OpDescriptor small(OpKind op, DType dtype, std::int64_t n, std::int64_t size, std::int64_t c,
                   std::int64_t m, std::int64_t stride) {
  const bool dw = op == OpKind::kDepthwiseConv2dNativeBackpropInput ||
                  op == OpKind::kDepthwiseConv2dNativeBackpropFilter;
  OpDescriptor d;
  d.op = op;
  d.dtype = dtype;
  const std::int64_t out = (size + stride - 1) / stride;
  d.input = {n, size, size, c};
  d.filter = {3, 3, c, m};
  d.out_backprop = {n, out, out, dw ? c * m : m};
  d.strides = {1, stride, stride, 1};
  d.padding = Padding::kSame;
  return d;
}

TEST(CudaTuneInterpret, EveryCandidateMatchesTheReference) {
  Expected<codegen::CudaDeviceInfo> device = codegen::known_cuda_target("sm_80");
  ASSERT_TRUE(device.has_value());
  struct Case {
    OpDescriptor desc;
    MathMode math = MathMode::kExact;
  };
  const std::vector<Case> cases = {
      {small(OpKind::kConv2DBackpropInput, DType::kFloat32, 2, 9, 8, 12, 2)},
      {small(OpKind::kConv2DBackpropFilter, DType::kFloat32, 4, 24, 4, 8, 1)},
      {small(OpKind::kConv2DBackpropInput, DType::kBFloat16, 2, 8, 16, 24, 1)},
      {small(OpKind::kConv2DBackpropFilter, DType::kHalf, 4, 24, 8, 16, 1)},
      {small(OpKind::kConv2DBackpropFilter, DType::kFloat32, 2, 16, 8, 8, 1), MathMode::kTF32},
      {small(OpKind::kDepthwiseConv2dNativeBackpropInput, DType::kFloat32, 2, 7, 12, 2, 2)},
      {small(OpKind::kDepthwiseConv2dNativeBackpropFilter, DType::kBFloat16, 4, 24, 6, 2, 1)},
  };
  std::vector<CudaJob> jobs;
  for (const Case& c : cases) {
    Expected<ConvProblem> p = validate(c.desc);
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    codegen::PlanOptions options;
    options.math_mode = c.math;
    Expected<std::vector<codegen::CudaTuneCandidate>> candidates =
        codegen::cuda_tune_candidates(*p, *device, options);
    ASSERT_TRUE(candidates.has_value()) << candidates.status().to_string();
    EXPECT_GE(candidates->size(), 2u) << to_text(c.desc);
    for (const codegen::CudaTuneCandidate& candidate : *candidates) {
      jobs.push_back({*p, to_text(c.desc), candidate.forced, c.math});
    }
  }
  int ran = 0;
  const std::vector<std::string> failures = run_jobs_in_parallel(jobs, 4242, &ran);
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 10); ++i) {
    ADD_FAILURE() << failures[i];
  }
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << jobs.size() << " failed";
  EXPECT_EQ(ran, static_cast<int>(jobs.size()));
  std::printf("[   TUNE   ] cuda-interpret tuning candidates: %zu kernels, %zu failed\n",
              jobs.size(), failures.size());
}

}  // namespace
}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
