// TensorFlow's own test cases on the CUDA backend in the interpret mode (device
// "cuda-interpret"): hard-coded results must match, rejected cases must fail with the rule
// TensorFlow names, and configurations without values must agree with the naive reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"
#include "support/test_conformance.hpp"
#include "support/test_tensors.hpp"

namespace convjit::testing {
namespace {

std::vector<std::int64_t> to_vector(const std::array<std::int64_t, 4>& a) {
  return {a.begin(), a.end()};
}

class CudaInterpretConformance : public ::testing::TestWithParam<ConformanceCase> {};

TEST_P(CudaInterpretConformance, MatchesTensorFlow) {
  const ConformanceCase& c = GetParam();
  CompileOptions options;
  options.device = "cuda-interpret";
  if (c.expect_error) {
    try {
      (void)compile(c.desc, options);
      ADD_FAILURE() << "compile accepted a case TensorFlow rejects: " << *c.expect_error;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.error_substring), std::string::npos)
          << "message: " << e.what() << "\nTensorFlow: " << *c.expect_error;
    }
    return;
  }
  Expected<ConvProblem> problem = validate(c.desc);
  ASSERT_TRUE(problem.has_value()) << problem.status().to_string();
  const Kernel kernel = compile(c.desc, options);
  ASSERT_EQ(kernel.backend(), "cuda");
  ASSERT_EQ(kernel.device(), "cuda-interpret");
  const auto a_shape = kernel.operand_shape(0);
  const auto b_shape = kernel.operand_shape(1);
  const auto out_shape = kernel.operand_shape(2);
  CaseOperands in = make_operands(c, a_shape, b_shape);
  TestTensor got(c.desc.dtype, out_shape);
  got.fill(std::numeric_limits<double>::quiet_NaN());
  TestTensor ref(c.desc.dtype, out_shape);
  kernel.run(in.a.view(), in.b.view(), got.view());
  run_reference(c.desc, in.a.view(), in.b.view(), ref.view());
  if (c.expected) {
    TestTensor want(DType::kFloat64, out_shape);
    ASSERT_EQ(static_cast<std::int64_t>(c.expected->size()), want.elements());
    for (std::int64_t i = 0; i < want.elements(); ++i) {
      want.set(i, (*c.expected)[static_cast<std::size_t>(i)]);
    }
    EXPECT_TRUE(all_close(got.view(), want.view(), expected_tolerance(c.desc.dtype)))
        << "kernel " << kernel.name();
  } else {
    EXPECT_TRUE(
        all_close(got.view(), ref.view(), tolerance(c.desc.dtype, reduction_length(*problem))))
        << "kernel " << kernel.name() << " vs the naive reference";
  }
}

INSTANTIATE_TEST_SUITE_P(TensorFlow, CudaInterpretConformance,
                         ::testing::ValuesIn(load_conformance_cases(conformance_path())),
                         [](const ::testing::TestParamInfo<ConformanceCase>& info) {
                           return info.param.test_name;
                         });

}  // namespace
}  // namespace convjit::testing
