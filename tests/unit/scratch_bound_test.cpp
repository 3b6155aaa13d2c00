// Scratch memory of compiled kernels: packed filters, per-chunk partial sums and per-thread
// operand copies stay within a bound set by the filter, one image, a block of the core's L2
// and the thread count, never by the batch. Each case has a batch of 16 or more so that a
// batch-sized copy would exceed the bound (on hosts with up to 1 MiB of L2; larger L2s hold
// some of these batches whole, and the plan copies them whole there), runs once, and matches
// the naive reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_info.hpp"
#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

using convjit::testing::TestTensor;

struct ScratchCase {
  std::string name;
  OpDescriptor desc;
};

OpDescriptor desc_of(OpKind op, DataFormat format, std::vector<std::int64_t> input,
                     std::vector<std::int64_t> filter, std::int64_t stride, Padding padding) {
  OpDescriptor d;
  d.op = op;
  d.data_format = format;
  d.input = std::move(input);
  d.filter = std::move(filter);
  d.strides = format == DataFormat::kNHWC ? std::vector<std::int64_t>{1, stride, stride, 1}
                                          : std::vector<std::int64_t>{1, 1, stride, stride};
  d.padding = padding;
  // out_backprop: SAME or VALID output sizes, in the data format's order.
  const bool cl = format == DataFormat::kNHWC;
  const std::int64_t h = d.input[cl ? 1 : 2], w = d.input[cl ? 2 : 3];
  const std::int64_t oh =
      padding == Padding::kSame ? (h + stride - 1) / stride : (h - d.filter[0] + stride) / stride;
  const std::int64_t ow =
      padding == Padding::kSame ? (w + stride - 1) / stride : (w - d.filter[1] + stride) / stride;
  const std::int64_t oc =
      op == OpKind::kDepthwiseConv2dNativeBackpropInput || op == OpKind::kDepthwiseConv2dNativeBackpropFilter
          ? d.filter[2] * d.filter[3]
          : d.filter[3];
  d.out_backprop = cl ? std::vector<std::int64_t>{d.input[0], oh, ow, oc}
                      : std::vector<std::int64_t>{d.input[0], oc, oh, ow};
  return d;
}

OpDescriptor with_dtype(OpDescriptor d, DType dtype) {
  d.dtype = dtype;
  return d;
}

std::vector<ScratchCase> scratch_cases() {
  using enum OpKind;
  const DataFormat nhwc = DataFormat::kNHWC, nchw = DataFormat::kNCHW;
  return {
      // Three input channels: W positions as vectors over a transposed copy of dy.
      {"stem_input_gradient",
       desc_of(kConv2DBackpropInput, nhwc, {16, 24, 24, 3}, {7, 7, 3, 16}, 2, Padding::kSame)},
      // NCHW input gradient: channels-last copies of dy and dx around the NHWC schedule.
      {"nchw_input_gradient",
       desc_of(kConv2DBackpropInput, nchw, {16, 16, 10, 10}, {3, 3, 16, 16}, 1, Padding::kSame)},
      {"nhwc_input_gradient",
       desc_of(kConv2DBackpropInput, nhwc, {16, 10, 10, 16}, {3, 3, 16, 16}, 1, Padding::kSame)},
      // Filter gradients: per-chunk partial sums.
      {"nhwc_filter_gradient",
       desc_of(kConv2DBackpropFilter, nhwc, {16, 12, 12, 16}, {3, 3, 16, 16}, 1, Padding::kSame)},
      // NCHW filter gradient: a channels-last copy of dy, per thread when the batch divides
      // among the threads (18 images for 1, 2 and 3).
      {"nchw_filter_gradient",
       desc_of(kConv2DBackpropFilter, nchw, {18, 16, 12, 12}, {3, 3, 16, 16}, 1, Padding::kSame)},
      // ... and when it does not (17 images for 2 and 3 threads): each thread takes rows of
      // every image and copies each image into its own slot first.
      {"nchw_filter_gradient_odd_batch",
       desc_of(kConv2DBackpropFilter, nchw, {17, 16, 12, 12}, {3, 3, 16, 16}, 1, Padding::kSame)},
      // bfloat16 filter gradients (image pairs where the CPU has avx512_bf16, widened
      // copies elsewhere): per pair of images in chunks, and for a deep layer (dW of 590 KB
      // in f32, 4x4 images) every pair of a thread's images copied before the tiles, which
      // stays within dW's size.
      {"bf16_filter_gradient", with_dtype(desc_of(kConv2DBackpropFilter, nhwc, {16, 24, 24, 16},
                                                  {3, 3, 16, 16}, 1, Padding::kSame),
                                          DType::kBFloat16)},
      {"bf16_deep_filter_gradient", with_dtype(desc_of(kConv2DBackpropFilter, nhwc, {16, 4, 4, 128},
                                                       {3, 3, 128, 128}, 1, Padding::kSame),
                                               DType::kBFloat16)},
      {"depthwise_input_gradient", desc_of(kDepthwiseConv2dNativeBackpropInput, nhwc,
                                           {16, 12, 12, 8}, {3, 3, 8, 2}, 1, Padding::kSame)},
      // A depth multiplier's filter gradient: dy de-interleaved one image per thread.
      {"depthwise_multiplier_filter_gradient",
       desc_of(kDepthwiseConv2dNativeBackpropFilter, nhwc, {16, 12, 12, 8}, {3, 3, 8, 2}, 1,
               Padding::kSame)},
      // NCHW depthwise: a zero-bordered copy of each group's dy planes, per thread; at
      // stride 2 with repeated columns, plus the per-column weights.
      {"nchw_depthwise_input_gradient", desc_of(kDepthwiseConv2dNativeBackpropInput, nchw,
                                                {16, 8, 12, 12}, {3, 3, 8, 2}, 1, Padding::kSame)},
      {"nchw_depthwise_input_gradient_stride2",
       desc_of(kDepthwiseConv2dNativeBackpropInput, nchw, {16, 8, 12, 12}, {3, 3, 8, 2}, 2,
               Padding::kSame)},
      // NCHW depthwise filter gradient: channels-last copies of x and dy, one image per thread
      // (18 images: the batch divides among 1, 2 and 3 threads; 17: rows of every image split
      // among the threads, each copying the images into its own slot), and in bfloat16.
      {"nchw_depthwise_filter_gradient",
       desc_of(kDepthwiseConv2dNativeBackpropFilter, nchw, {18, 16, 12, 12}, {3, 3, 16, 1}, 1,
               Padding::kSame)},
      {"nchw_depthwise_filter_gradient_odd_batch",
       desc_of(kDepthwiseConv2dNativeBackpropFilter, nchw, {17, 16, 12, 12}, {3, 3, 16, 2}, 2,
               Padding::kSame)},
      {"nchw_depthwise_filter_gradient_bf16",
       with_dtype(desc_of(kDepthwiseConv2dNativeBackpropFilter, nchw, {18, 16, 12, 12},
                          {3, 3, 16, 1}, 1, Padding::kSame),
                  DType::kBFloat16)},
  };
}

class ScratchBound : public ::testing::TestWithParam<std::tuple<ScratchCase, int>> {};

TEST_P(ScratchBound, StaysWithinFilterAndOneImagePerThread) {
  const auto& [c, threads] = GetParam();
  SCOPED_TRACE(c.name);
  Expected<ConvProblem> problem = validate(c.desc);
  ASSERT_TRUE(problem.has_value()) << problem.status().to_string();
  CompileOptions options;
  options.num_threads = threads;
  options.always_compile = true;
  const Kernel kernel = compile(c.desc, options);

  // Per thread: two copies of the filter (packed, or partial sums) and two images (a copy in
  // and a copy out), in the widest accumulator type, and a block of the core's L2 (a filter
  // gradient whose operands fit half the L2 copies a thread's whole share of the batch at
  // once: on a host with 2 MiB of L2, 16 images of this suite's small layers).
  const ConvProblem& p = problem.value();
  const std::int64_t filter = p.kh * p.kw * p.filter_in * p.oc;
  const std::int64_t image = std::max(p.ih * p.iw * p.ic, p.oh * p.ow * p.oc);
  const std::int64_t l2 = cpu::CpuInfo::host(cpu::Isa::kAvx512).l2_bytes;
  const auto bound = static_cast<std::size_t>(threads * (2 * (filter + image) * 8 + l2));
  EXPECT_LE(kernel.scratch_bytes(), bound)
      << kernel.name() << ": " << kernel.scratch_bytes() << " bytes of scratch, batch " << p.n;

  std::vector<TestTensor> operands;
  for (int i = 0; i < 2; ++i) {
    operands.push_back(testing::random_tensor(c.desc.dtype, kernel.operand_shape(i), 7 + i));
  }
  TestTensor got(c.desc.dtype, kernel.operand_shape(2));
  TestTensor want(c.desc.dtype, kernel.operand_shape(2));
  kernel.run(operands[0].view(), operands[1].view(), got.view());
  run_reference(c.desc, operands[0].view(), operands[1].view(), want.view());
  EXPECT_TRUE(testing::all_close(got.view(), want.view(),
                                 testing::tolerance(c.desc.dtype, testing::reduction_length(p))))
      << kernel.name();
}

INSTANTIATE_TEST_SUITE_P(Ops, ScratchBound,
                         ::testing::Combine(::testing::ValuesIn(scratch_cases()),
                                            ::testing::Values(1, 2, 3)),
                         [](const ::testing::TestParamInfo<ScratchBound::ParamType>& info) {
                           return std::get<0>(info.param).name + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace convjit
