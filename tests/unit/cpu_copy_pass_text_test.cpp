// Text tests of the CPU schedule passes that copy, pair, widen or stream operands (bfloat16
// pairs, 16-bit widening, padded and repeated dy copies, non-temporal output stores), on
// small problems and cores built by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "codegen/cpu/cpu_pipeline.hpp"
#include "codegen/cpu/passes/passes.hpp"
#include "ir/lower.hpp"
#include "ir/printer.hpp"
#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"
#include "support/cpu_test_targets.hpp"
#include "support/ir_test_problems.hpp"

namespace convjit::cpu {
namespace {

using namespace ir;
using convjit::testing::avx2_target;
using convjit::testing::strided_backprop_data;
using testing::generic_target;
using testing::lower_and_schedule;
using testing::run;
using testing::TestTarget;

ConvProblem tiny_backprop_data(DType dtype) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.dtype = dtype;
  p.n = 1;
  p.ih = p.oh = 1;
  p.iw = p.ow = 2;
  p.ic = p.filter_in = 3;
  p.kh = p.kw = 1;
  p.oc = 4;
  return p;
}

// An AVX-512 target with avx512_bf16, whatever the host.
TestTarget bf16_dot_target() {
  TestTarget t = generic_target(1);
  t.isa = Isa::kAvx512;
  t.vector_bytes = 64;
  t.vector_registers = 32;
  t.has_avx512_bf16 = true;
  return t;
}

// dX of a 1x1x2x3 bfloat16 input, 1x1x3x4 filter, VALID, on a CPU with avx512_bf16: the
// packed filter's output channels pair up ([o/2][i][2]), the packing copy writes both members
// of each pair, and the tile takes two output channels (dy's adjacent pair) per point.
TEST(IrPassText, PairReductionInterleavesOutputChannelPairs) {
  ConvProblem p = tiny_backprop_data(DType::kBFloat16);
  const TestTarget t = bf16_dot_target();
  EXPECT_EQ(print(run(pair_reduction, run(pack_filter, lower(p), t), t)), R"(kernel backprop_data bfloat16 NHWC
buffer dx X bfloat16 dims [1, 1, 2, 3] strides [6, 6, 3, 1]
buffer w W bfloat16 dims [1, 1, 3, 4] strides [12, 12, 4, 1]
buffer dy Y bfloat16 dims [1, 1, 2, 4] strides [8, 8, 4, 1]
buffer wp scratch bfloat16 dims [1, 1, 2, 3, 2] strides [12, 12, 6, 2, 1]
for pkh in [0, 1):
  for pkw in [0, 1):
    for po in [0, 2):
      for pi in [0, 3):
        store wp[pkh, pkw, po, pi, 0] = w[pkh, pkw, pi, 2*po]
        store wp[pkh, pkw, po, pi, 1] = w[pkh, pkw, pi, 2*po + 1]
for n in [0, 1):
  for ih in [0, 1):
    for iw in [0, 2):
      for i in [0, 3):
        tile r:1 x v:1
          reduce kh in [0, 1) kw in [0, 1) o in [0, 2)
          guard 0 <= ih - kh < 1
          guard 0 <= iw - kw < 2
          dx[n, ih, iw, i] = dy[n, ih - kh, iw - kw, 2*o] * wp[kh, kw, o, i, 0] + dy[n, ih - kh, iw - kw, 2*o + 1] * wp[kh, kw, o, i, 1]
)");
  // Without avx512_bf16, or with an odd channel count, the nest is left as it was.
  const LoopNest packed = run(pack_filter, lower(p), t);
  TestTarget no_bf16 = t;
  no_bf16.has_avx512_bf16 = false;
  EXPECT_EQ(print(run(pair_reduction, packed, no_bf16)), print(packed));
  p.oc = 3;
  const LoopNest odd = run(pack_filter, lower(p), t);
  EXPECT_EQ(print(run(pair_reduction, odd, t)), print(odd));
}

// A 16-bit filter the target multiplies in float32 is widened by the packing copy (f16 always,
// bf16 without avx512_bf16), so the tiles load float32 vectors; a bf16 filter the dot product
// takes stays bf16 (pair_reduction packs it in pairs), and float32 stays float32.
TEST(IrPassText, PackFilterWidensFiltersTheTargetMultipliesInFloat32) {
  ConvProblem p = tiny_backprop_data(DType::kFloat32);
  TestTarget avx2 = generic_target(1);
  avx2.isa = Isa::kAvx2;
  avx2.vector_bytes = 32;
  avx2.vector_registers = 16;
  const TestTarget bf16_dot = bf16_dot_target();
  auto packed_dtype = [&](DType dtype, const TestTarget& t) {
    p.dtype = dtype;
    const LoopNest n = run(pack_filter, lower(p), t);
    const int wp = n.buffer_of_kind(BufferKind::kScratch);
    return wp < 0 ? DType::kFloat64 : n.buffers[static_cast<std::size_t>(wp)].dtype;
  };
  EXPECT_EQ(packed_dtype(DType::kBFloat16, avx2), DType::kFloat32);
  EXPECT_EQ(packed_dtype(DType::kHalf, avx2), DType::kFloat32);
  EXPECT_EQ(packed_dtype(DType::kHalf, bf16_dot), DType::kFloat32);
  EXPECT_EQ(packed_dtype(DType::kBFloat16, bf16_dot), DType::kBFloat16);
  EXPECT_EQ(packed_dtype(DType::kFloat32, avx2), DType::kFloat32);
  EXPECT_EQ(packed_dtype(DType::kFloat64, avx2), DType::kFloat64);
  // The copy itself converts: its source is the caller's bf16 filter.
  p.dtype = DType::kBFloat16;
  const std::string text = print(run(pack_filter, lower(p), avx2));
  EXPECT_NE(text.find("buffer wp scratch float32 dims [1, 1, 4, 3]"), std::string::npos) << text;
  EXPECT_NE(text.find("store wp[pkh, pkw, po, pi] = w[pkh, pkw, pi, po]"), std::string::npos)
      << text;
}

// Depthwise tiles take fewer rows when the pixel stride maps rows onto few L1 sets: 512 float
// channels (2 KiB a pixel) stop at 4 rows, 496 channels keep the model's taller tile.
TEST(IrPassText, ElementwiseRowsStopWherePixelsShareL1Sets) {
  auto widest_rows = [](std::int64_t channels, bool avx2 = false) {
    ConvProblem p;
    p.direction = ConvDirection::kBackpropData;
    p.depthwise = true;
    p.n = 1;
    p.ih = p.iw = p.oh = p.ow = 14;
    p.ic = p.oc = p.groups = channels;
    p.filter_in = 1;
    p.kh = p.kw = 3;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    TestTarget t = generic_target(1);
    t.isa = Isa::kAvx512;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_fma = true;
    if (avx2) t = avx2_target(1 << 20);
    std::int64_t rows = 0;
    LoopNest nest = run(register_tile, border_peel(lower(p)), t);
    for_each_tile(nest.body, {}, [&](Tile& tile, const VarRanges&) { rows = std::max(rows, tile.rows); });
    return rows;
  };
  EXPECT_EQ(widest_rows(512), 4);
  EXPECT_GT(widest_rows(496), 4);
  // ymm vectors are half a line: rows a line or less apart share lines and take many rows,
  // rows further apart stop at 4.
  EXPECT_GT(widest_rows(8, true), 4);
  EXPECT_GT(widest_rows(16, true), 4);
  EXPECT_EQ(widest_rows(32, true), 4);
}

// A 2-channel input gradient takes the W-vector form: its tiles read dy through the transposed
// copy dyt, which gets a zero column on each side (the taps reach W positions -1 and 5 of 5)
// and none in H (the one row always holds); the guards go, so border_peel finds nothing to
// split.
TEST(IrPassText, PadTransposedOutBackpropZeroesTheColumnsTheTapsReach) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = 2;
  p.iw = 12;
  p.ic = p.filter_in = 2;
  p.kh = 2;
  p.kw = 3;
  p.oc = 3;
  p.oh = 1;
  p.ow = 5;
  p.stride_h = p.stride_w = 2;
  const TestTarget t = avx2_target(1 << 20);
  LoopNest n = stride_residue_split(run(position_vectors, lower(p), t));
  EXPECT_EQ(print(run(pad_transposed_out_backprop, std::move(n), t)), R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 2, 12, 2] strides [48, 24, 2, 1]
buffer w W float32 dims [2, 3, 2, 3] strides [18, 6, 3, 1]
buffer dy Y float32 dims [1, 1, 5, 3] strides [15, 15, 3, 1]
buffer dyt scratch float32 dims [1, 1, 7, 3] strides [21, 21, 1, 7]
for tn in [0, 1):
  for zh in [0, 1):
    for zo in [0, 3):
      for zw in [0, 1):
        store dyt[tn, zh, zw, zo] = 0
  for zh in [0, 1):
    for zo in [0, 3):
      for zw in [6, 7):
        store dyt[tn, zh, zw, zo] = 0
  for toh in [0, 1):
    for to in [0, 3):
      for tow in [0, 5):
        store dyt[tn, toh, tow + 1, to] = dy[tn, toh, tow, to]
for n in [0, 1):
  for qh in [0, 1) "residue 0":
    for i in [0, 2):
      for qw in [0, 6) "residue 0":
        tile r:1 x v:1
          reduce o in [0, 3) jh in [0, 1) jw in [0, 2)
          dx[n, 2*qh, 2*qw, i] = dyt[n, qh - jh, qw - jw + 1, o] * w[2*jh, 2*jw, i, o]
      for qw in [0, 6) "residue 1":
        tile r:1 x v:1
          reduce o in [0, 3) jh in [0, 1) jw in [0, 1)
          dx[n, 2*qh, 2*qw + 1, i] = dyt[n, qh - jh, qw - jw + 1, o] * w[2*jh, 2*jw + 1, i, o]
  for qh in [0, 1) "residue 1":
    for i in [0, 2):
      for qw in [0, 6) "residue 0":
        tile r:1 x v:1
          reduce o in [0, 3) jh in [0, 1) jw in [0, 2)
          dx[n, 2*qh + 1, 2*qw, i] = dyt[n, qh - jh, qw - jw + 1, o] * w[2*jh + 1, 2*jw, i, o]
      for qw in [0, 6) "residue 1":
        tile r:1 x v:1
          reduce o in [0, 3) jh in [0, 1) jw in [0, 1)
          dx[n, 2*qh + 1, 2*qw + 1, i] = dyt[n, qh - jh, qw - jw + 1, o] * w[2*jh + 1, 2*jw + 1, i, o]
)");
}

// dX of an NCHW depthwise 1x2x4x5 input, 3x3 filter, depth multiplier 2, SAME (1 on each side).
ConvProblem nchw_depthwise_backprop_data() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.format = DataFormat::kNCHW;
  p.depthwise = true;
  p.n = 1;
  p.ih = p.oh = 4;
  p.iw = p.ow = 5;
  p.ic = p.groups = 2;
  p.filter_in = 1;
  p.oc = 4;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  return p;
}

// Each group's M planes are copied right before the tiles that read them, into a slot of M
// zero-bordered planes per image; the tiles lose their guards.
TEST(IrPassText, CopyChannelsFirstOutBackpropPadsEachGroupsPlanes) {
  const TestTarget t = avx2_target(1 << 20);
  LoopNest n = run(copy_channels_first_out_backprop, lower(nchw_depthwise_backprop_data()), t);
  EXPECT_EQ(print(run(pad_transposed_out_backprop, std::move(n), t)),
            R"(kernel backprop_data float32 NCHW
buffer dx X float32 dims [1, 4, 5, 2] strides [40, 5, 1, 20]
buffer w W float32 dims [3, 3, 1, 4] strides [12, 4, 4, 1]
buffer dy Y float32 dims [1, 4, 5, 4] strides [80, 5, 1, 20]
buffer dyp scratch float32 dims [1, 6, 7, 2] strides [84, 7, 1, 42]
for n in [0, 1):
  for zh in [0, 6):
    for zo in [0, 2):
      for zw in [0, 1):
        store dyp[n, zh, zw, zo] = 0
  for zh in [0, 6):
    for zo in [0, 2):
      for zw in [6, 7):
        store dyp[n, zh, zw, zo] = 0
  for zh in [0, 1):
    for zo in [0, 2):
      for zw in [1, 6):
        store dyp[n, zh, zw, zo] = 0
  for zh in [5, 6):
    for zo in [0, 2):
      for zw in [1, 6):
        store dyp[n, zh, zw, zo] = 0
  for g in [0, 2):
    for po in [0, 2):
      for poh in [0, 4):
        for pow in [0, 5):
          store dyp[n, poh + 1, pow + 1, po] = dy[n, poh, pow, 2*g + po]
    for ih in [0, 4):
      for iw in [0, 5):
        tile r:1 x v:1
          reduce kh in [0, 3) kw in [0, 3) o in [0, 2)
          dx[n, ih, iw, g] = dyp[n, ih - kh + 2, iw - kw + 2, o] * w[kh, kw, 0, 2*g + o]
)");
}

// With fewer images than threads the threads split the group loop, so each group copies into
// planes of its own (a whole image); with enough images one slot of M planes per image,
// which privatize_batch_copies then gives each thread.
TEST(IrPassText, CopyChannelsFirstOutBackpropKeepsTheGroupLoopParallel) {
  ConvProblem p = nchw_depthwise_backprop_data();
  p.ih = p.oh = p.iw = p.ow = 64;
  p.ic = p.groups = 32;
  p.oc = 64;
  TestTarget t = avx2_target(1 << 20);
  t.num_threads = 2;
  auto dyp = [&](const LoopNest& nest) {
    return std::find_if(nest.buffers.begin(), nest.buffers.end(),
                        [](const Buffer& b) { return b.name == "dyp"; });
  };
  const LoopNest one = lower_and_schedule(p, t);
  ASSERT_NE(dyp(one), one.buffers.end());
  EXPECT_EQ(dyp(one)->dims, (std::vector<std::int64_t>{1, 66, 66, 64}));
  EXPECT_NE(one.schedule_summary.find("par=g"), std::string::npos) << one.schedule_summary;
  p.n = 5;
  const LoopNest five = lower_and_schedule(p, t);
  ASSERT_NE(dyp(five), five.buffers.end());
  EXPECT_EQ(dyp(five)->dims, (std::vector<std::int64_t>{2, 66, 66, 2}));
  EXPECT_NE(five.schedule_summary.find("priv=x2"), std::string::npos) << five.schedule_summary;
}

// Operand copies the tiles take vectors from are in the accumulator type: 16-bit operands
// are widened once there, where the tiles would widen each vector at every tap. NCHW
// depthwise dy planes (bf16 and f16 on AVX2 ran 1.6-5.8x faster) and the NHWC depthwise
// multiplier's deinterleaved filter and dy (1.7-1.8x) and the NCHW filter gradient's
// channels-last dy (1.4-1.6x); float32 and float64 keep theirs.
void expect_copies_in(const LoopNest& nest, const std::vector<std::string>& copies, DType dtype) {
  for (const std::string& name : copies) {
    const auto b = std::find_if(nest.buffers.begin(), nest.buffers.end(),
                                [&](const Buffer& x) { return x.name == name; });
    ASSERT_NE(b, nest.buffers.end()) << name << " " << dtype_name(nest.problem.dtype);
    EXPECT_EQ(b->dtype, dtype) << name << " " << dtype_name(nest.problem.dtype);
  }
}

TEST(IrPassText, SixteenBitOperandCopiesWidenToTheAccumulatorType) {
  const TestTarget t = avx2_target(1 << 20);
  for (const auto& [dtype, copied] : {std::pair{DType::kBFloat16, DType::kFloat32},
                                      {DType::kHalf, DType::kFloat32},
                                      {DType::kFloat32, DType::kFloat32},
                                      {DType::kFloat64, DType::kFloat64}}) {
    for (const DataFormat format : {DataFormat::kNCHW, DataFormat::kNHWC}) {
      ConvProblem p = nchw_depthwise_backprop_data();  // 2 channels, multiplier 2
      p.format = format;
      p.dtype = dtype;
      const LoopNest nest = lower_and_schedule(p, t);
      const std::vector<std::string> copies = format == DataFormat::kNCHW
                                                  ? std::vector<std::string>{"dyp"}
                                                  : std::vector<std::string>{"wd", "dyd"};
      expect_copies_in(nest, copies, copied);
    }
    // NCHW filter gradient: the channels-last copy of dy (the tiles' column vectors).
    ConvProblem f = nchw_depthwise_backprop_data();
    f.direction = ConvDirection::kBackpropFilter;
    f.depthwise = false;
    f.groups = 1;
    f.filter_in = f.ic;
    f.dtype = dtype;
    expect_copies_in(lower_and_schedule(f, t), {"dyc"}, copied);
  }
}

// Stride 2, an even filter width: each dy column is copied twice and the taps go in pairs
// against per-column weights packed once per call (pad_left is 1: even columns take w's taps 1
// and 3, odd ones taps 0 and 2), so the tile reads both operands along dx's column and the
// residue split leaves W alone. (An odd width would pair its last tap with a zero weight, which
// an Inf in dy would turn into NaN: odd widths take the residues.)
TEST(IrPassText, CopyChannelsFirstOutBackpropRepeatsColumnsAtStride2) {
  ConvProblem p = nchw_depthwise_backprop_data();
  p.iw = 5;
  p.ow = 3;
  p.ih = 4;
  p.oh = 2;
  p.kw = 4;
  p.stride_h = p.stride_w = 2;
  p.pad_top = 0;
  p.pad_left = 1;
  p.pad_bottom = 1;
  p.pad_right = 2;
  const TestTarget t = avx2_target(1 << 20);
  EXPECT_EQ(print(run(copy_channels_first_out_backprop, lower(p), t)),
            R"(kernel backprop_data float32 NCHW
buffer dx X float32 dims [1, 4, 5, 2] strides [40, 5, 1, 20]
buffer w W float32 dims [3, 4, 1, 4] strides [16, 4, 4, 1]
buffer dy Y float32 dims [1, 2, 3, 4] strides [24, 3, 1, 6]
buffer dyp scratch float32 dims [1, 2, 6, 2] strides [24, 6, 1, 12]
buffer wl scratch float32 dims [3, 2, 4, 6] strides [48, 24, 6, 1]
for lkh in [0, 3):
  for lc in [0, 4):
    for lw in [0, 3):
      store wl[lkh, 0, lc, 2*lw] = w[lkh, 1, 0, lc]
      store wl[lkh, 0, lc, 2*lw + 1] = w[lkh, 0, 0, lc]
      store wl[lkh, 1, lc, 2*lw] = w[lkh, 3, 0, lc]
      store wl[lkh, 1, lc, 2*lw + 1] = w[lkh, 2, 0, lc]
for n in [0, 1):
  for g in [0, 2):
    for po in [0, 2):
      for poh in [0, 2):
        for pow in [0, 3):
          store dyp[n, poh, 2*pow, po] = dy[n, poh, pow, 2*g + po]
          store dyp[n, poh, 2*pow + 1, po] = dy[n, poh, pow, 2*g + po]
    for ih in [0, 4):
      for iw in [0, 5):
        tile r:1 x v:1
          reduce kh in [0, 3) jw in [0, 2) o in [0, 2)
          guard 0 <= (ih - kh) / 2 < 2
          guard 0 <= iw - 2*jw + 1 < 6
          dx[n, ih, iw, g] = dyp[n, (ih - kh) / 2, iw - 2*jw + 1, o] * wl[kh, jw, 2*g + o, iw]
)");
  // Through the whole pipeline every tile writes dx along contiguous columns.
  const LoopNest nest = lower_and_schedule(p, t);
  for_each_tile(const_cast<std::vector<Stmt>&>(nest.body), {}, [&](Tile& tile, const VarRanges&) {
    Affine offset;
    ASSERT_TRUE(flatten_access(nest, tile.c, &offset));
    if (tile.cols > 1) EXPECT_EQ(offset.coef_of(tile.col_var), 1) << print(nest);
  });
}

// The NCHW depthwise tile over 14-wide rows of H: rows share each tap's broadcast, and the
// columns past the first vector end on an overlapping whole vector (8 + 8 from column 6)
// rather than a masked 6. A filter gradient, whose tiles block_reduction later makes
// accumulate, keeps its masked tail.
TEST(IrPassText, RegisterTileGivesPlaneRowsAndOverlappingTails) {
  ConvProblem p = nchw_depthwise_backprop_data();
  p.ih = p.oh = p.iw = p.ow = 14;
  const TestTarget t = avx2_target(1 << 20);
  const std::string text = print(lower_and_schedule(p, t));
  EXPECT_NE(text.find("for iw in [6, 14) step 8 \"cols tail, overlapping\":"), std::string::npos)
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(tile r:([2-9]|1[0-4]) x v:8\n)"))) << text;
  ConvProblem f = p;
  f.direction = ConvDirection::kBackpropFilter;
  f.format = DataFormat::kNHWC;
  f.depthwise = false;
  f.ic = f.filter_in = 12;
  f.groups = 1;
  f.oc = 100;  // 16-wide tiles and a 4-wide tail
  const std::string filter_text = print(lower_and_schedule(f, t));
  EXPECT_EQ(filter_text.find("overlapping"), std::string::npos) << filter_text;
  EXPECT_TRUE(std::regex_search(filter_text, std::regex(R"(tile r:\d+ x v:4\n)"))) << filter_text;
}

// The tiles writing the op's output, streamed or not; every streamed one must write whole
// lines (64 bytes per row, rows a multiple of 64 bytes apart).
struct StreamCount {
  int streamed = 0, plain = 0, broken = 0;
  bool named = false;
};

StreamCount count_streamed(const ConvProblem& p, const TestTarget& t) {
  LoopNest nest = lower_and_schedule(p, t);
  StreamCount c;
  const int out = nest.buffer_of_kind(p.direction == ConvDirection::kBackpropData ? BufferKind::kX
                                                                                  : BufferKind::kW);
  for_each_tile(nest.body, {}, [&](Tile& tile, const VarRanges&) {
    if (tile.c.buffer != out) return;
    (tile.stream ? c.streamed : c.plain)++;
    Affine offset;
    const std::int64_t eb = dtype_size(p.dtype);
    if (tile.stream && (!flatten_access(nest, tile.c, &offset) || tile.cols * eb % 64 != 0 ||
                        (tile.rows > 1 && offset.coef_of(tile.row_var) * eb % 64 != 0))) {
      ++c.broken;
    }
  });
  c.named = nest.schedule_summary.find("nt") != std::string::npos;
  return c;
}

TEST(IrPassText, StreamOutputStoresMarksWholeLineTilesOfOutputsBeyondTheCache) {
  auto depthwise = [](std::int64_t channels) {
    ConvProblem p;
    p.direction = ConvDirection::kBackpropData;
    p.depthwise = true;
    p.n = 1;
    p.ih = p.iw = p.oh = p.ow = 6;
    p.ic = p.oc = p.groups = channels;
    p.filter_in = 1;
    p.kh = p.kw = 3;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    return p;
  };
  TestTarget t = avx2_target(1 << 20);
  t.llc_bytes = 1024;  // below every output here
  // 48 channels: pixels 192 bytes apart, three lines; 16-channel tiles write whole lines.
  const StreamCount wide = count_streamed(depthwise(48), t);
  EXPECT_GT(wide.streamed, 0);
  EXPECT_EQ(wide.broken, 0);
  EXPECT_TRUE(wide.named);
  // 40 channels: pixels 160 bytes apart, so multi-row tiles and the 8-channel tails stay
  // plain.
  const StreamCount odd = count_streamed(depthwise(40), t);
  EXPECT_GT(odd.plain, 0);
  EXPECT_EQ(odd.broken, 0);
  // Outputs that fit the cache keep plain stores.
  t.llc_bytes = 1 << 20;
  const StreamCount cached = count_streamed(depthwise(48), t);
  EXPECT_EQ(cached.streamed, 0);
  EXPECT_FALSE(cached.named);
  // 16-bit outputs take two vectors per line (64 channels: 32-channel tiles), and an output
  // some other statement writes never streams: NCHW's dx, which a Store copies out of the
  // channels-last scratch the tiles fill.
  t.llc_bytes = 0;
  ConvProblem bf16 = depthwise(64);
  bf16.dtype = DType::kBFloat16;
  const StreamCount half_width = count_streamed(bf16, t);
  EXPECT_GT(half_width.streamed, 0);
  EXPECT_EQ(half_width.broken, 0);
  ConvProblem nchw = depthwise(48);
  nchw.format = DataFormat::kNCHW;
  nchw.depthwise = false;
  nchw.groups = 1;
  nchw.filter_in = 48;
  const StreamCount copied = count_streamed(nchw, t);
  EXPECT_EQ(copied.streamed, 0);
  // There the copy itself streams.
  const std::string copy_text = print(lower_and_schedule(nchw, t));
  EXPECT_NE(
      copy_text.find("store dx[chunk + nb, fih, fiw, fi] = dxc[chunk, fih, fiw, fi] stream\n"),
      std::string::npos)
      << copy_text;
  EXPECT_TRUE(copied.named);
  // The printed tile says so.
  EXPECT_NE(print(lower_and_schedule(depthwise(48), t)).find(" stream\n"), std::string::npos);
}

// A 16-bit NHWC depthwise input gradient reads f32 copies of the filter (once per call) and
// of dy (one image per thread, right before its tiles), so its elementwise tiles widen
// nothing; f32 and the depth multiplier (whose copies already write f32) are left alone.
TEST(IrPassText, WidenDepthwiseOperandsGivesTheTilesF32Copies) {
  auto depthwise = [](DType dtype, std::int64_t multiplier) {
    ConvProblem p;
    p.direction = ConvDirection::kBackpropData;
    p.depthwise = true;
    p.dtype = dtype;
    p.n = 3;
    p.ih = p.iw = p.oh = p.ow = 6;
    p.ic = p.groups = 16;
    p.oc = 16 * multiplier;
    p.filter_in = 1;
    p.kh = p.kw = 3;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    return p;
  };
  TestTarget t = avx2_target(1 << 20);
  t.num_threads = 2;
  for (const DType dtype : {DType::kBFloat16, DType::kHalf}) {
    const LoopNest n = lower_and_schedule(depthwise(dtype, 1), t);
    const std::string text = print(n);
    SCOPED_TRACE(text);
    EXPECT_NE(n.schedule_summary.find("f32ops"), std::string::npos);
    EXPECT_NE(text.find("buffer wf scratch float32 dims [3, 3, 1, 16]"), std::string::npos);
    // One image per thread (this small problem runs on one), not the batch of three.
    EXPECT_TRUE(std::regex_search(
        text, std::regex(R"(buffer dyf scratch float32 dims \[[12], 6, 6, 16\])")));
    EXPECT_FALSE(std::regex_search(text, std::regex(R"(= dy\[[^\n]* \* )")));
    EXPECT_EQ(text.find("* w["), std::string::npos);
  }
  EXPECT_EQ(print(lower_and_schedule(depthwise(DType::kFloat32, 1), t)).find("dyf"),
            std::string::npos);
  EXPECT_EQ(print(lower_and_schedule(depthwise(DType::kBFloat16, 2), t)).find("dyf"),
            std::string::npos);
}

}  // namespace
}  // namespace convjit::cpu
