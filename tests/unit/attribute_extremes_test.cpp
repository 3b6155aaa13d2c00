// Compile time bounded by the work, not by attribute values. A stride, dilation or padding may
// be any int64 TensorFlow accepts; a tiny problem with a stride of 2^31 - 1 or 10^12 must
// compile as fast as with a stride of 2. Stride-residue splitting used to walk every residue
// (about 40 s for 2^31 - 1, hours for 10^12), and its tap search a whole period of taps.
//
// Every case here is a few elements; each must compile on the interpreter and on the default
// backend, give the naive reference's result, and do so well within a deadline that the old
// code missed by orders of magnitude (the deadline is generous: sanitizer builds on a loaded
// machine still take milliseconds).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"
#include "ir/lower.hpp"
#include "ir/printer.hpp"
#include "ir/transforms/transforms.hpp"
#include "support/test_conv_cases.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

using testing::ConvCase;
using testing::TestTensor;

constexpr std::int64_t kStrideInt32Max = 2147483647;
constexpr std::int64_t kTrillion = 1000000000000;
// Far beyond what the old code could finish; far above what the new code takes (milliseconds).
constexpr double kDeadlineSeconds = 10.0;

struct ExtremeCase {
  std::string label;
  OpKind op;
  ConvCase geometry;
};

// The reproducer: Conv2DBackpropInput, input_sizes [1,1,1,1], 1x1 filter.
ConvCase unit_backprop_input(std::int64_t stride) {
  ConvCase c;
  c.stride_h = c.stride_w = stride;
  return c;
}

std::vector<ExtremeCase> extreme_cases() {
  std::vector<ExtremeCase> cases;
  for (std::int64_t stride : {kStrideInt32Max, kTrillion}) {
    cases.push_back({fmt::format("unit_backprop_input_stride_{}", stride),
                     OpKind::kConv2DBackpropInput, unit_backprop_input(stride)});
  }
  // A stride as large as the image: nearly every residue meets no tap and only writes zeros.
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    ConvCase wide;
    wide.format = format;
    wide.h = wide.w = 256;
    wide.kh = wide.kw = 3;
    wide.filter_out = 2;
    wide.stride_h = wide.stride_w = 256;
    wide.padding = Padding::kSame;
    cases.push_back({fmt::format("image_sized_stride_{}", data_format_name(format)),
                     OpKind::kConv2DBackpropInput, wide});
  }
  constexpr OpKind kOps[] = {OpKind::kConv2D,
                             OpKind::kConv2DBackpropInput,
                             OpKind::kConv2DBackpropFilter,
                             OpKind::kDepthwiseConv2dNative,
                             OpKind::kDepthwiseConv2dNativeBackpropInput,
                             OpKind::kDepthwiseConv2dNativeBackpropFilter};
  for (OpKind op : kOps) {
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      const std::string name = fmt::format("{}_{}", op_name(op), data_format_name(format));
      ConvCase base;
      base.format = format;
      base.depthwise = is_depthwise(op);
      base.n = 1;
      base.h = 3;
      base.w = 3;
      base.c = 2;
      base.filter_in = base.depthwise ? 1 : 2;
      base.filter_out = 2;
      // Huge strides: one output row and column; SAME pads by the window only.
      ConvCase strided = base;
      strided.kh = strided.kw = 3;
      strided.stride_h = strided.stride_w = kTrillion;
      strided.padding = Padding::kSame;
      cases.push_back({name + "_stride_1e12_same", op, strided});
      // Huge dilations: only the centre tap meets the image; SAME pads by about 10^12.
      ConvCase dilated = base;
      dilated.kh = dilated.kw = 3;
      dilated.dilation_h = dilated.dilation_w = kTrillion;
      dilated.padding = Padding::kSame;
      cases.push_back({name + "_dilation_1e12_same", op, dilated});
      // Huge stride and dilation together, with a stride that is no power of two.
      ConvCase both = dilated;
      both.stride_h = both.stride_w = kStrideInt32Max;
      cases.push_back({name + "_stride_and_dilation_same", op, both});
      // Huge explicit padding: a 2-tap window whose first tap reads 10^12 rows of zeros.
      ConvCase padded = base;
      padded.h = padded.w = 1;
      padded.kh = padded.kw = 2;
      padded.dilation_h = padded.dilation_w = kTrillion;
      padded.padding = Padding::kExplicit;
      padded.pad_top = padded.pad_left = kTrillion;
      cases.push_back({name + "_explicit_pad_1e12", op, padded});
    }
  }
  return cases;
}

class AttributeExtremes : public ::testing::TestWithParam<std::string> {};

TEST_P(AttributeExtremes, CompileInMillisecondsAndMatchTheReference) {
  for (const ExtremeCase& ec : extreme_cases()) {
    SCOPED_TRACE(ec.label);
    const OpDescriptor desc = ec.geometry.descriptor(ec.op);
    const auto shapes = ec.geometry.operand_shapes(ec.op);
    const TestTensor a = testing::random_tensor(DType::kFloat32, shapes[0], 1);
    const TestTensor b = testing::random_tensor(DType::kFloat32, shapes[1], 2);
    TestTensor got(DType::kFloat32, shapes[2]), want(DType::kFloat32, shapes[2]);
    got.fill(std::nan(""));

    CompileOptions options;
    options.backend = GetParam();
    options.num_threads = 1;
    options.always_compile = true;
    const auto start = std::chrono::steady_clock::now();
    const Kernel kernel = compile(desc, options);
    kernel.run(a.view(), b.view(), got.view());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, kDeadlineSeconds) << to_text(desc);

    run_reference(desc, a.view(), b.view(), want.view());
    EXPECT_TRUE(testing::all_close(
        got.view(), want.view(),
        testing::tolerance(DType::kFloat32, ec.geometry.reduction_length(ec.op))))
        << to_text(desc) << " on " << kernel.backend();
  }
}

// "" is the default backend (x86 where the host has AVX2 and FMA, else the interpreter).
INSTANTIATE_TEST_SUITE_P(Backends, AttributeExtremes, ::testing::Values("interpreter", ""),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("default") : info.param;
                         });

// The input gradient `c` lowered and split into stride residues, printed.
std::string residue_split_text(const ConvCase& c) {
  const Expected<ConvProblem> problem = validate(c.descriptor(OpKind::kConv2DBackpropInput));
  EXPECT_TRUE(problem.has_value()) << problem.status().message();
  if (!problem.has_value()) return "";
  return ir::print(ir::stride_residue_split(ir::lower(problem.value())));
}

// How often `what` occurs in `text`, overlapping occurrences included.
std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// The residue split makes one part per residue some input position has: a single input row
// and column is one part each, whatever the stride.
TEST(AttributeExtremesSplit, ResidueSplitMakesOnePartPerResidueReached) {
  for (std::int64_t stride : {std::int64_t{2}, kStrideInt32Max, kTrillion}) {
    const std::string text = residue_split_text(unit_backprop_input(stride));
    SCOPED_TRACE(text);
    EXPECT_EQ(occurrences(text, "residue "), 2u);  // residue 0 of ih, residue 0 of iw
  }
}

// Each run of residues without taps makes one shared part: at stride 128 with a 16-tap window
// of dilation 8, the taps reach residues 0, 8, ..., 120 only, leaving 15 runs (1..7, 9..15,
// ...) per dimension, each with a new loop variable. (The split once kept a reference to a
// variable's name across those, dangling when the name table grew: the fuzz corpus input
// residue_runs_rename replays the case that showed it under AddressSanitizer.)
TEST(AttributeExtremesSplit, EachRunOfResiduesWithoutTapsSharesOnePart) {
  ConvCase c;
  c.h = c.w = 128;
  c.kh = c.kw = 16;
  c.stride_h = c.stride_w = 128;
  c.dilation_h = c.dilation_w = 8;
  const std::string text = residue_split_text(c);
  SCOPED_TRACE(text);
  auto count = [&](const std::string& what) { return occurrences(text, what); };
  for (int run = 0; run < 15; ++run) {
    const std::string label = fmt::format("residues {}..{}, no taps", 8 * run + 1, 8 * run + 7);
    EXPECT_GE(count(label), 2u) << label;
  }
}

// Residues no tap reaches share one part: an 8x8 input gradient at stride 8 with a 1x1 filter
// is residue 0 of ih (residue 0 of iw, then iw's residues 1..7 together) and ih's residues
// 1..7 together, not 64 parts.
TEST(AttributeExtremesSplit, ResiduesWithoutTapsShareOnePart) {
  ConvCase c;
  c.h = c.w = 8;
  c.stride_h = c.stride_w = 8;
  const std::string text = residue_split_text(c);
  SCOPED_TRACE(text);
  auto count = [&](const std::string& what) { return occurrences(text, what); };
  EXPECT_EQ(count("\"residue 0\""), 2u);
  EXPECT_EQ(count("\"residues 1..7, no taps\""), 2u);
  EXPECT_EQ(count("for rh in [1, 8)"), 1u);
  EXPECT_EQ(count("for rw in [1, 8)"), 1u);
  EXPECT_EQ(count("tile "), 3u);
}

// Taps of a wide window at a large stride: the closed-form first tap of each residue must be
// the one a search finds. Every (stride, dilation, pad) combination here is checked against
// the reference through the interpreter, whose nest is the residue-split one.
TEST(AttributeExtremesSplit, ResidueTapsMatchTheReferenceForWideWindows) {
  for (std::int64_t stride : {3, 7, 12}) {
    for (std::int64_t dilation : {1, 2, 5, 9}) {
      ConvCase c;
      c.h = 13;
      c.w = 11;
      c.c = 2;
      c.filter_in = 2;
      c.filter_out = 3;
      c.kh = 5;
      c.kw = 4;
      c.stride_h = stride;
      c.stride_w = stride + 1;
      c.dilation_h = dilation;
      c.dilation_w = dilation + 1;
      c.padding = Padding::kExplicit;
      c.pad_top = 4;
      c.pad_bottom = 20;
      c.pad_left = 3;
      c.pad_right = 17;
      if (c.out_h() <= 0 || c.out_w() <= 0) continue;
      const OpKind op = OpKind::kConv2DBackpropInput;
      const OpDescriptor desc = c.descriptor(op);
      SCOPED_TRACE(to_text(desc));
      const auto shapes = c.operand_shapes(op);
      const TestTensor a = testing::random_tensor(DType::kFloat32, shapes[0], 3);
      const TestTensor b = testing::random_tensor(DType::kFloat32, shapes[1], 4);
      TestTensor got(DType::kFloat32, shapes[2]), want(DType::kFloat32, shapes[2]);
      CompileOptions options;
      options.backend = "interpreter";
      options.num_threads = 1;
      compile(desc, options).run(a.view(), b.view(), got.view());
      run_reference(desc, a.view(), b.view(), want.view());
      EXPECT_TRUE(testing::all_close(got.view(), want.view(),
                                     testing::tolerance(DType::kFloat32, c.reduction_length(op))));
    }
  }
}

}  // namespace
}  // namespace convjit
