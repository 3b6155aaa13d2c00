// The tensor-core kernels' operand copies (CudaOperandTile) in the interpret mode against the
// naive reference: channels that hold whole 16-byte runs (the sweep's small channel counts
// never do), in both memory orders of the shared tiles (NHWC's rows of k and rows of m/n,
// NCHW's gathers), with 1 to 4 pipeline stages over several k tiles, and on tensors that start
// one element past a 16-byte boundary, where the kernels must fall back to element copies (a
// misaligned 16-byte cp.async is an interpreter error).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda/cuda_plan.hpp"
#include "cuda/cuda_test_support.hpp"
#include "frontend/validate.hpp"

namespace convjit::testing {
namespace {

struct Geometry {
  OpKind op;
  std::vector<std::int64_t> input, filter;  // NHWC input, HWIO filter
  std::int64_t stride, dilation;
  Padding padding;
};

// Channels of a group: 8, 16 or 24 (runs of 8 16-bit, 4 f32 and 2 f64 elements), and a
// grouped case; K spans several k tiles of every dtype's tile_k so that the stages rotate.
const Geometry kGeometries[] = {
    {OpKind::kConv2D, {2, 6, 5, 16}, {3, 3, 16, 24}, 1, 1, Padding::kSame},
    {OpKind::kConv2DBackpropInput, {2, 7, 7, 16}, {3, 3, 16, 24}, 2, 1, Padding::kSame},
    {OpKind::kConv2DBackpropFilter, {2, 9, 8, 16}, {3, 3, 16, 16}, 1, 2, Padding::kValid},
    {OpKind::kConv2DBackpropFilter, {4, 8, 8, 24}, {1, 1, 24, 32}, 1, 1, Padding::kValid},
    {OpKind::kConv2DBackpropInput, {2, 5, 6, 16}, {3, 3, 8, 32}, 1, 1, Padding::kSame},
    {OpKind::kConv2D, {1, 5, 5, 32}, {3, 3, 16, 16}, 2, 1, Padding::kValid},
};

ConvProblem problem_of(const Geometry& g, DType dtype, DataFormat format) {
  OpDescriptor d;
  d.op = g.op;
  d.dtype = dtype;
  d.data_format = format;
  d.padding = g.padding;
  const std::int64_t n = g.input[0], h = g.input[1], w = g.input[2], c = g.input[3];
  const std::int64_t oc = g.filter[3];
  auto out = [&](std::int64_t size, std::int64_t k) {
    const std::int64_t span = (k - 1) * g.dilation + 1;
    return g.padding == Padding::kSame ? (size + g.stride - 1) / g.stride
                                       : (size - span + g.stride) / g.stride;
  };
  const std::int64_t oh = out(h, g.filter[0]), ow = out(w, g.filter[1]);
  const bool nchw = format == DataFormat::kNCHW;
  auto shape = [&](std::int64_t channels, std::int64_t rows, std::int64_t cols) {
    return nchw ? std::vector<std::int64_t>{n, channels, rows, cols}
                : std::vector<std::int64_t>{n, rows, cols, channels};
  };
  d.input = shape(c, h, w);
  d.filter = g.filter;
  if (g.op != OpKind::kConv2D) d.out_backprop = shape(oc, oh, ow);
  d.strides = nchw ? std::vector<std::int64_t>{1, 1, g.stride, g.stride}
                   : std::vector<std::int64_t>{1, g.stride, g.stride, 1};
  d.dilations = nchw ? std::vector<std::int64_t>{1, 1, g.dilation, g.dilation}
                     : std::vector<std::int64_t>{1, g.dilation, g.dilation, 1};
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  return p.has_value() ? *p : ConvProblem{};
}

TEST(CudaOperandTiles, RunsOrdersAndStagesMatchReference) {
  const DType dtypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  std::vector<CudaJob> jobs;
  int variant = 0;
  for (const Geometry& g : kGeometries) {
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      for (DType dtype : dtypes) {
        const ConvProblem p = problem_of(g, dtype, format);
        const bool f64 = dtype == DType::kFloat64;
        const bool sixteen = dtype == DType::kHalf || dtype == DType::kBFloat16;
        const std::string tiles[] = {
            "",
            f64 ? ",tile=16x16x4,warps=1x1"
                : fmt::format(",tile=32x16x{},warps=2x1", sixteen ? 16 : 8),
            f64 ? ",tile=32x32x8,warps=2x2"
                : fmt::format(",tile=64x32x{},warps=2x2", sixteen ? 32 : 16)};
        std::string forced = fmt::format("algo=mma{},stages={}", tiles[variant % 3],
                                         1 + variant % 4);
        if (p.direction == ConvDirection::kBackpropFilter) {
          forced += fmt::format(",splitk={}", 1 + variant % 3);
        }
        const std::string label = fmt::format("{} {} {}", direction_name(p.direction),
                                              dtype_name(dtype), data_format_name(format));
        const MathMode math = dtype == DType::kFloat32 ? MathMode::kTF32 : MathMode::kExact;
        jobs.push_back({p, label, forced, math, false});
        // NHWC's runs on misaligned tensors (NCHW gathers element by element anyway).
        if (format == DataFormat::kNHWC) {
          codegen::PlanOptions options;
          options.forced = "algo=mma";
          options.math_mode = math;
          Expected<codegen::CudaDeviceInfo> sm80 = codegen::known_cuda_target("sm_80");
          ASSERT_TRUE(sm80.has_value());
          auto plan = codegen::make_cuda_plan(p, *sm80, options);
          ASSERT_TRUE(plan.has_value()) << plan.status().to_string();
          EXPECT_TRUE((*plan)->operand_a.vector && (*plan)->operand_b.vector)
              << label << ": " << (*plan)->kernel_name;
          jobs.push_back({p, label + " misaligned", "algo=mma", math, true});
        }
        ++variant;
      }
    }
  }
  int ran = 0;
  const std::vector<std::string> failures = run_jobs_in_parallel(jobs, 7100, &ran);
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(ran, static_cast<int>(jobs.size()));
  std::printf("[   TILES  ] cuda-interpret operand tiles: %zu kernels, %zu failed\n", jobs.size(),
              failures.size());
}

}  // namespace
}  // namespace convjit::testing
