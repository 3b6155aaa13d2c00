// Golden tests of the generated CUDA source: a few descriptors, one per generator (FFMA
// implicit GEMM over stride-residue classes, tensor-core GEMM with split-K, cp.async TF32,
// depthwise, direct), compared line by line with tests/golden/cuda/<name>.cu. A deliberate
// change of the generator regenerates them: CONVJIT_UPDATE_GOLDEN=1 rewrites the files; review
// the diff like code.
#ifdef CONVJIT_HAVE_CUDA

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/cuda/cuda_plan.hpp"
#include "codegen/cuda/cuda_source.hpp"
#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"

namespace convjit::testing {
namespace {

struct Golden {
  const char* file;
  const char* descriptor;
  const char* forced;
  MathMode math;
};

const Golden kGolden[] = {
    {"dgrad_f32_nhwc_stride2_igemm",
     "Conv2DBackpropInput dtype=float32 data_format=NHWC input_sizes=[2,7,8,6] filter=[3,3,6,5] "
     "out_backprop=[2,4,4,5] strides=[1,2,2,1] dilations=[1,1,1,1] padding=SAME",
     "", MathMode::kExact},
    {"wgrad_bf16_nhwc_mma_splitk",
     "Conv2DBackpropFilter dtype=bfloat16 data_format=NHWC input=[4,16,16,32] "
     "filter_sizes=[3,3,32,64] out_backprop=[4,16,16,64] strides=[1,1,1,1] dilations=[1,1,1,1] "
     "padding=SAME",
     "algo=mma,splitk=4", MathMode::kExact},
    {"fwd_f32_nchw_tf32_mma",
     "Conv2D dtype=float32 data_format=NCHW input=[1,16,10,10] filter=[3,3,16,24] "
     "strides=[1,1,1,1] dilations=[1,1,2,2] padding=VALID",
     "", MathMode::kTF32},
    {"dw_dgrad_f16_nchw",
     "DepthwiseConv2dNativeBackpropInput dtype=half data_format=NCHW input_sizes=[2,16,9,9] "
     "filter=[3,3,16,2] out_backprop=[2,32,5,5] strides=[1,1,2,2] dilations=[1,1,1,1] "
     "padding=SAME",
     "", MathMode::kExact},
    {"wgrad_f64_nhwc_grouped_direct",
     "Conv2DBackpropFilter dtype=float64 data_format=NHWC input=[1,5,5,4] "
     "filter_sizes=[2,2,2,6] out_backprop=[1,4,4,6] strides=[1,1,1,1] dilations=[1,1,1,1] "
     "padding=VALID",
     "algo=direct,threads=128", MathMode::kExact},
};

std::string golden_path(const char* file) {
  return std::string(CONVJIT_TESTS_DIR) + "/golden/cuda/" + file + ".cu";
}

class CudaGoldenSource : public ::testing::TestWithParam<Golden> {};

TEST_P(CudaGoldenSource, MatchesTheReviewedSource) {
  const Golden& g = GetParam();
  Expected<ConvProblem> problem = validate(parse_descriptor(g.descriptor));
  ASSERT_TRUE(problem.has_value()) << problem.status().to_string();
  Expected<codegen::CudaDeviceInfo> device = codegen::known_cuda_target("sm_80");
  ASSERT_TRUE(device.has_value());
  codegen::PlanOptions options;
  options.forced = g.forced;
  options.math_mode = g.math;
  Expected<std::unique_ptr<codegen::CudaPlan>> plan =
      codegen::make_cuda_plan(*problem, *device, options);
  ASSERT_TRUE(plan.has_value()) << plan.status().to_string();
  Expected<codegen::CudaProgram> program = codegen::generate_cuda_program(**plan);
  ASSERT_TRUE(program.has_value()) << program.status().to_string();
  // The launches (as comments) and the body.
  std::string formatted;
  for (char c : codegen::launches_to_text(*program)) {
    formatted += c;
    if (c == '\n') formatted += "// ";
  }
  const std::string generated = "// " + formatted + "\n" + program->body;
  const std::string path = golden_path(g.file);
  if (const char* update = std::getenv("CONVJIT_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream(path) << generated;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no golden file " << path << " (CONVJIT_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  if (want.str() == generated) return;
  // Name the first differing line.
  std::istringstream a(want.str()), b(generated);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) break;
    if (la != lb || more_a != more_b) {
      FAIL() << path << ":" << line << " differs\n  golden:    " << la << "\n  generated: " << lb
             << "\n(CONVJIT_UPDATE_GOLDEN=1 rewrites the file after a deliberate change)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaGoldenSource, ::testing::ValuesIn(kGolden),
                         [](const ::testing::TestParamInfo<Golden>& info) {
                           return std::string(info.param.file);
                         });

}  // namespace
}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
