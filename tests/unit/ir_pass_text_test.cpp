// Text tests of lowering and each schedule pass: the exact IR before and after on small
// problems. The expected texts were checked by hand against the formulas in SEMANTICS.md: they
// pin down the schedule's shape (which taps each residue and border keeps, the tile sizes, the
// chunked reduction), not just its numerical result, which ir_schedule_sweep_test checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "ir/lower.hpp"
#include "ir/passes/pass_util.hpp"
#include "ir/passes/passes.hpp"
#include "ir/pipeline.hpp"
#include "ir/printer.hpp"

namespace convjit::ir {
namespace {

// dX of a 1x5x5x3 input, 3x3x3x2 filter, stride 2, SAME padding (1 on each side).
ConvProblem strided_backprop_data() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = p.iw = 5;
  p.ic = p.filter_in = 3;
  p.kh = p.kw = 3;
  p.oc = 2;
  p.stride_h = p.stride_w = 2;
  p.oh = p.ow = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  return p;
}

TEST(IrPassText, LoweringPrintsTheGatherForm) {
  EXPECT_EQ(print(lower(strided_backprop_data())), R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 5, 5, 3] strides [75, 15, 3, 1]
buffer w W float32 dims [3, 3, 3, 2] strides [18, 6, 2, 1]
buffer dy Y float32 dims [1, 3, 3, 2] strides [18, 6, 2, 1]
for n in [0, 1):
  for ih in [0, 5):
    for iw in [0, 5):
      for i in [0, 3):
        tile r:1 x v:1
          reduce kh in [0, 3) kw in [0, 3) o in [0, 2)
          guard 0 <= (ih - kh + 1) / 2 < 3
          guard 0 <= (iw - kw + 1) / 2 < 3
          dx[n, ih, iw, i] = dy[n, (ih - kh + 1) / 2, (iw - kw + 1) / 2, o] * w[kh, kw, i, o]
)");
}

TEST(IrPassText, StrideResidueSplitKeepsOnlyTheTapsEachResidueMeets) {
  const Target t = Target::generic(1);
  EXPECT_EQ(print(stride_residue_split(lower(strided_backprop_data()), t)), R"(kernel backprop_data float32 NHWC "res2x2"
buffer dx X float32 dims [1, 5, 5, 3] strides [75, 15, 3, 1]
buffer w W float32 dims [3, 3, 3, 2] strides [18, 6, 2, 1]
buffer dy Y float32 dims [1, 3, 3, 2] strides [18, 6, 2, 1]
for n in [0, 1):
  for qh in [0, 3) "residue 0":
    for qw in [0, 3) "residue 0":
      for i in [0, 3):
        tile r:1 x v:1
          reduce jh in [0, 1) jw in [0, 1) o in [0, 2)
          guard 0 <= qh - jh < 3
          guard 0 <= qw - jw < 3
          dx[n, 2*qh, 2*qw, i] = dy[n, qh - jh, qw - jw, o] * w[2*jh + 1, 2*jw + 1, i, o]
    for qw in [0, 2) "residue 1":
      for i in [0, 3):
        tile r:1 x v:1
          reduce jh in [0, 1) jw in [0, 2) o in [0, 2)
          guard 0 <= qh - jh < 3
          guard 0 <= qw - jw + 1 < 3
          dx[n, 2*qh, 2*qw + 1, i] = dy[n, qh - jh, qw - jw + 1, o] * w[2*jh + 1, 2*jw, i, o]
  for qh in [0, 2) "residue 1":
    for qw in [0, 3) "residue 0":
      for i in [0, 3):
        tile r:1 x v:1
          reduce jh in [0, 2) jw in [0, 1) o in [0, 2)
          guard 0 <= qh - jh + 1 < 3
          guard 0 <= qw - jw < 3
          dx[n, 2*qh + 1, 2*qw, i] = dy[n, qh - jh + 1, qw - jw, o] * w[2*jh, 2*jw + 1, i, o]
    for qw in [0, 2) "residue 1":
      for i in [0, 3):
        tile r:1 x v:1
          reduce jh in [0, 2) jw in [0, 2) o in [0, 2)
          guard 0 <= qh - jh + 1 < 3
          guard 0 <= qw - jw + 1 < 3
          dx[n, 2*qh + 1, 2*qw + 1, i] = dy[n, qh - jh + 1, qw - jw + 1, o] * w[2*jh, 2*jw, i, o]
)");
}

TEST(IrPassText, PackFilterAndRegisterTile) {
  const Target t = Target::generic(1);
  LoopNest n = border_peel(stride_residue_split(lower(strided_backprop_data()), t), t);
  EXPECT_EQ(print(register_tile(pack_filter(std::move(n), t), t)), R"(kernel backprop_data float32 NHWC "res2x2 pack r3x3"
buffer dx X float32 dims [1, 5, 5, 3] strides [75, 15, 3, 1]
buffer w W float32 dims [3, 3, 3, 2] strides [18, 6, 2, 1]
buffer dy Y float32 dims [1, 3, 3, 2] strides [18, 6, 2, 1]
buffer wp scratch float32 dims [3, 3, 2, 3] strides [18, 6, 3, 1]
for pkh in [0, 3):
  for pkw in [0, 3):
    for po in [0, 2):
      for pi in [0, 3):
        store wp[pkh, pkw, po, pi] = w[pkh, pkw, pi, po]
for n in [0, 1):
  for qh in [0, 3) "residue 0, interior":
    for qw in [0, 3) step 3 "residue 0":
      for i in [0, 3) step 3:
        tile r:3 x v:3
          reduce jh in [0, 1) jw in [0, 1) o in [0, 2)
          dx[n, 2*qh, 2*r + 2*qw, i + v] = dy[n, qh - jh, r + qw - jw, o] * wp[2*jh + 1, 2*jw + 1, o, i + v]
    for qw in [0, 2) step 2 "residue 1":
      for i in [0, 3) step 3:
        tile r:2 x v:3
          reduce jh in [0, 1) jw in [0, 2) o in [0, 2)
          dx[n, 2*qh, 2*r + 2*qw + 1, i + v] = dy[n, qh - jh, r + qw - jw + 1, o] * wp[2*jh + 1, 2*jw, o, i + v]
  for qh in [0, 2) "residue 1, interior":
    for qw in [0, 3) step 3 "residue 0":
      for i in [0, 3) step 3:
        tile r:3 x v:3
          reduce jh in [0, 2) jw in [0, 1) o in [0, 2)
          dx[n, 2*qh + 1, 2*r + 2*qw, i + v] = dy[n, qh - jh + 1, r + qw - jw, o] * wp[2*jh, 2*jw + 1, o, i + v]
    for qw in [0, 2) step 2 "residue 1":
      for i in [0, 3) step 3:
        tile r:2 x v:3
          reduce jh in [0, 2) jw in [0, 2) o in [0, 2)
          dx[n, 2*qh + 1, 2*r + 2*qw + 1, i + v] = dy[n, qh - jh + 1, r + qw - jw + 1, o] * wp[2*jh, 2*jw, o, i + v]
)");
}

TEST(IrPassText, BorderPeelTightensBorderTapsAndClearsTheInterior) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = p.iw = p.oh = p.ow = 4;
  p.ic = p.filter_in = p.oc = 2;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  const Target t = Target::generic(4);
  EXPECT_EQ(print(border_peel(stride_residue_split(lower(p), t), t)), R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 4, 4, 2] strides [32, 8, 2, 1]
buffer w W float32 dims [3, 3, 2, 2] strides [12, 4, 2, 1]
buffer dy Y float32 dims [1, 4, 4, 2] strides [32, 8, 2, 1]
for n in [0, 1):
  for ih in [0, 1) "top":
    for iw in [0, 1) "left":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 2) kw in [0, 2) o in [0, 2)
          dx[n, 0, 0, i] = dy[n, -kh + 1, -kw + 1, o] * w[kh, kw, i, o]
    for iw in [1, 3) "interior":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 2) kw in [0, 3) o in [0, 2)
          dx[n, 0, iw, i] = dy[n, -kh + 1, iw - kw + 1, o] * w[kh, kw, i, o]
    for iw in [3, 4) "right":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 2) kw in [1, 3) o in [0, 2)
          dx[n, 0, 3, i] = dy[n, -kh + 1, -kw + 4, o] * w[kh, kw, i, o]
  for ih in [1, 3) "interior":
    for iw in [0, 1) "left":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 3) kw in [0, 2) o in [0, 2)
          dx[n, ih, 0, i] = dy[n, ih - kh + 1, -kw + 1, o] * w[kh, kw, i, o]
    for iw in [1, 3) "interior":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 3) kw in [0, 3) o in [0, 2)
          dx[n, ih, iw, i] = dy[n, ih - kh + 1, iw - kw + 1, o] * w[kh, kw, i, o]
    for iw in [3, 4) "right":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [0, 3) kw in [1, 3) o in [0, 2)
          dx[n, ih, 3, i] = dy[n, ih - kh + 1, -kw + 4, o] * w[kh, kw, i, o]
  for ih in [3, 4) "bottom":
    for iw in [0, 1) "left":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [1, 3) kw in [0, 2) o in [0, 2)
          dx[n, 3, 0, i] = dy[n, -kh + 4, -kw + 1, o] * w[kh, kw, i, o]
    for iw in [1, 3) "interior":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [1, 3) kw in [0, 3) o in [0, 2)
          dx[n, 3, iw, i] = dy[n, -kh + 4, iw - kw + 1, o] * w[kh, kw, i, o]
    for iw in [3, 4) "right":
      for i in [0, 2):
        tile r:1 x v:1
          reduce kh in [1, 3) kw in [1, 3) o in [0, 2)
          dx[n, 3, 3, i] = dy[n, -kh + 4, -kw + 4, o] * w[kh, kw, i, o]
)");
}

TEST(IrPassText, RegisterTileAddsRowAndColumnTails) {
  ConvProblem p;
  p.direction = ConvDirection::kForward;
  p.n = p.ih = p.oh = p.kh = p.kw = 1;
  p.iw = p.ow = 17;
  p.ic = p.filter_in = 16;
  p.oc = 5;
  const Target t = Target::generic(1);
  EXPECT_EQ(print(register_tile(border_peel(lower(p), t), t)), R"(kernel forward float32 NHWC "r6x2"
buffer x X float32 dims [1, 1, 17, 16] strides [272, 272, 16, 1]
buffer w W float32 dims [1, 1, 16, 5] strides [80, 80, 5, 1]
buffer y Y float32 dims [1, 1, 17, 5] strides [85, 85, 5, 1]
for n in [0, 1):
  for oh in [0, 1) "interior":
    for ow in [0, 12) step 6:
      for o in [0, 4) step 2:
        tile r:6 x v:2
          reduce kh in [0, 1) kw in [0, 1) i in [0, 16)
          y[n, oh, ow + r, o + v] = x[n, oh + kh, ow + r + kw, i] * w[kh, kw, i, o + v]
      for o in [4, 5) "cols tail":
        tile r:6 x v:1
          reduce kh in [0, 1) kw in [0, 1) i in [0, 16)
          y[n, oh, ow + r, o + v] = x[n, oh + kh, ow + r + kw, i] * w[kh, kw, i, o + v]
    for ow in [12, 17) step 5 "rows tail":
      for o in [0, 4) step 2:
        tile r:5 x v:2
          reduce kh in [0, 1) kw in [0, 1) i in [0, 16)
          y[n, oh, ow + r, o + v] = x[n, oh + kh, ow + r + kw, i] * w[kh, kw, i, o + v]
      for o in [4, 5) "cols tail":
        tile r:5 x v:1
          reduce kh in [0, 1) kw in [0, 1) i in [0, 16)
          y[n, oh, ow + r, o + v] = x[n, oh + kh, ow + r + kw, i] * w[kh, kw, i, o + v]
)");
}

TEST(IrPassText, ParallelizeSplitsTheFilterGradientReduction) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropFilter;
  p.n = 480;  // large enough that four threads pay for waking them
  p.ih = p.iw = 16;
  p.ic = p.filter_in = 2;
  p.kh = p.kw = 1;
  p.oc = 3;
  p.oh = p.ow = 8;
  p.stride_h = p.stride_w = 2;
  const Target t = Target::generic(4);
  EXPECT_EQ(print(parallelize(register_tile(border_peel(lower(p), t), t), t)), R"(kernel backprop_filter float32 NHWC "r2x3 par=chunk,ro split=nx4"
buffer x X float32 dims [480, 16, 16, 2] strides [512, 32, 2, 1]
buffer dw W float32 dims [1, 1, 2, 3] strides [6, 6, 3, 1]
buffer dy Y float32 dims [480, 8, 8, 3] strides [192, 24, 3, 1]
buffer partial scratch float32 dims [4, 1, 1, 2, 3] strides [6, 6, 6, 3, 1]
for chunk in [0, 4) parallel:
  for kh in [0, 1) "interior":
    for kw in [0, 1):
      for i in [0, 2) step 2:
        for o in [0, 3) step 3:
          tile r:2 x v:3
            reduce n in [0, 120) oh in [0, 8) ow in [0, 8)
            partial[chunk, kh, kw, i + r, o + v] = x[n + 120*chunk, kh + 2*oh, kw + 2*ow, i + r] * dy[n + 120*chunk, oh, ow, o + v]
for rkh in [0, 1):
  for rkw in [0, 1):
    for ri in [0, 2):
      for ro in [0, 3) parallel:
        for rc in [1, 4):
          store partial[0, rkh, rkw, ri, ro] += partial[rc, rkh, rkw, ri, ro]
        store dw[rkh, rkw, ri, ro] = partial[0, rkh, rkw, ri, ro]
)");
  // One thread, or a tiny problem, stays serial and unsplit.
  const Target one = Target::generic(1);
  const LoopNest serial = parallelize(register_tile(border_peel(lower(p), one), one), one);
  EXPECT_EQ(serial.buffer_of_kind(BufferKind::kScratch), -1);
  EXPECT_EQ(serial.schedule_summary, "r2x3");
}

TEST(IrPassText, EmptyProblemLowersToAZeroFill) {
  ConvProblem p = strided_backprop_data();
  p.oc = 0;
  EXPECT_EQ(print(lower_and_schedule(p, Target::generic(4))),
            R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 5, 5, 3] strides [75, 15, 3, 1]
buffer w W float32 dims [3, 3, 3, 0] strides [0, 0, 0, 1]
buffer dy Y float32 dims [1, 3, 3, 0] strides [0, 0, 0, 1]
for n in [0, 1):
  for h in [0, 5):
    for w in [0, 5):
      for c in [0, 3):
        store dx[n, h, w, c] = 0
)");
}

// An AVX2 machine whatever the host: 8 f32 lanes, 16 registers, the given L2.
Target avx2_target(std::int64_t l2_bytes) {
  Target t;
  t.isa = Isa::kAvx2;
  t.vector_bytes = 32;
  t.vector_registers = 16;
  t.has_fma = t.has_f16c = true;
  t.l2_bytes = l2_bytes;
  return t;
}

// dX of a 1x2x4x72 input, 1x2x72x3 filter, VALID: on AVX2 the tile model picks 40 columns, so
// 72 input channels are a whole 40-wide block and a 32-wide partial one.
ConvProblem wide_backprop_data() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = 2;
  p.iw = 4;
  p.ic = p.filter_in = 72;
  p.kh = 1;
  p.kw = 2;
  p.oc = 3;
  p.oh = 2;
  p.ow = 3;
  return p;
}

TEST(IrPassText, BlockChannelsAroundEachRowWhenTheFilterStaysInL2) {
  const Target t = avx2_target(1 << 20);
  LoopNest n = pack_filter(border_peel(lower(wide_backprop_data()), t), t);
  EXPECT_EQ(print(block_channels(std::move(n), t)), R"(kernel backprop_data float32 NHWC "pack cb40r"
buffer dx X float32 dims [1, 2, 4, 72] strides [576, 288, 72, 1]
buffer w W float32 dims [1, 2, 72, 3] strides [432, 216, 3, 1]
buffer dy Y float32 dims [1, 2, 3, 3] strides [18, 9, 3, 1]
buffer wp scratch float32 dims [2, 1, 2, 3, 40] strides [240, 240, 120, 40, 1]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 2):
      for po in [0, 3):
        for pi in [0, 40):
          store wp[pb, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi, po]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 2):
      for po in [0, 3):
        for pi in [0, 32):
          store wp[pb + 1, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi + 40, po]
for n in [0, 1):
  for ih in [0, 2) "interior":
    for cb in [0, 1) "channel blocks":
      for iw in [0, 1) "left":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, 0, i + 40*cb] = dy[n, ih - kh, -kw, o] * wp[cb, kh, kw, o, i]
      for iw in [1, 3) "interior":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 2) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
      for iw in [3, 4) "right":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [1, 2) o in [0, 3)
            dx[n, ih, 3, i + 40*cb] = dy[n, ih - kh, -kw + 3, o] * wp[cb, kh, kw, o, i]
    for cb in [1, 2) "channel tail":
      for iw in [0, 1) "left":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, 0, i + 40*cb] = dy[n, ih - kh, -kw, o] * wp[cb, kh, kw, o, i]
      for iw in [1, 3) "interior":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 2) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
      for iw in [3, 4) "right":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [1, 2) o in [0, 3)
            dx[n, ih, 3, i + 40*cb] = dy[n, ih - kh, -kw + 3, o] * wp[cb, kh, kw, o, i]
)");
}

TEST(IrPassText, BlockChannelsAroundTheImageWhenTheFilterOutgrowsL2) {
  const Target t = avx2_target(1024);
  LoopNest n = pack_filter(border_peel(lower(wide_backprop_data()), t), t);
  EXPECT_EQ(print(block_channels(std::move(n), t)), R"(kernel backprop_data float32 NHWC "pack cb40"
buffer dx X float32 dims [1, 2, 4, 72] strides [576, 288, 72, 1]
buffer w W float32 dims [1, 2, 72, 3] strides [432, 216, 3, 1]
buffer dy Y float32 dims [1, 2, 3, 3] strides [18, 9, 3, 1]
buffer wp scratch float32 dims [2, 1, 2, 3, 40] strides [240, 240, 120, 40, 1]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 2):
      for po in [0, 3):
        for pi in [0, 40):
          store wp[pb, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi, po]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 2):
      for po in [0, 3):
        for pi in [0, 32):
          store wp[pb + 1, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi + 40, po]
for n in [0, 1):
  for cb in [0, 1) "channel blocks":
    for ih in [0, 2) "interior":
      for iw in [0, 1) "left":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, 0, i + 40*cb] = dy[n, ih - kh, -kw, o] * wp[cb, kh, kw, o, i]
      for iw in [1, 3) "interior":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 2) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
      for iw in [3, 4) "right":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [1, 2) o in [0, 3)
            dx[n, ih, 3, i + 40*cb] = dy[n, ih - kh, -kw + 3, o] * wp[cb, kh, kw, o, i]
  for cb in [1, 2) "channel tail":
    for ih in [0, 2) "interior":
      for iw in [0, 1) "left":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, 0, i + 40*cb] = dy[n, ih - kh, -kw, o] * wp[cb, kh, kw, o, i]
      for iw in [1, 3) "interior":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 2) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
      for iw in [3, 4) "right":
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [1, 2) o in [0, 3)
            dx[n, ih, 3, i + 40*cb] = dy[n, ih - kh, -kw + 3, o] * wp[cb, kh, kw, o, i]
)");
}

// dW of a 1x2x3x3 NCHW input (2 channels), 1x2x2x8 filter, VALID: 8 output channels fill an
// AVX2 vector.
ConvProblem nchw_backprop_filter() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropFilter;
  p.format = DataFormat::kNCHW;
  p.n = 1;
  p.ih = p.iw = 3;
  p.ic = p.filter_in = 2;
  p.kh = 1;
  p.kw = 2;
  p.oc = 8;
  p.oh = 3;
  p.ow = 2;
  return p;
}

TEST(IrPassText, ChannelsLastOutBackpropCopiesDyForVectorsOfOutputChannels) {
  const Target t = avx2_target(1 << 20);
  EXPECT_EQ(print(channels_last_out_backprop(lower(nchw_backprop_filter()), t)), R"(kernel backprop_filter float32 NCHW "dyc"
buffer x X float32 dims [1, 3, 3, 2] strides [18, 3, 1, 9]
buffer dw W float32 dims [1, 2, 2, 8] strides [32, 16, 8, 1]
buffer dy Y float32 dims [1, 3, 2, 8] strides [48, 2, 1, 6]
buffer dyc scratch float32 dims [1, 3, 2, 8] strides [48, 16, 8, 1]
for cn in [0, 1):
  for coh in [0, 3):
    for cow in [0, 2):
      for co in [0, 8):
        store dyc[cn, coh, cow, co] = dy[cn, coh, cow, co]
for kh in [0, 1):
  for kw in [0, 2):
    for i in [0, 2):
      for o in [0, 8):
        tile r:1 x v:1
          reduce n in [0, 1) oh in [0, 3) ow in [0, 2)
          guard 0 <= kh + oh < 3
          guard 0 <= kw + ow < 3
          dw[kh, kw, i, o] = x[n, kh + oh, kw + ow, i] * dyc[n, oh, ow, o]
)");
  // Fewer output channels than lanes still fill a masked vector; one channel stays scalar.
  ConvProblem few = nchw_backprop_filter();
  few.oc = 3;
  EXPECT_EQ(channels_last_out_backprop(lower(few), t).schedule_summary, "dyc");
  ConvProblem one = nchw_backprop_filter();
  one.oc = 1;
  EXPECT_EQ(channels_last_out_backprop(lower(one), t).schedule_summary, "");
}

// The NCHW filter gradient of 2 images on one thread: dy's channels-last copy moves into the
// batch loop, one image at a time into the single slot its tiles then read.
TEST(IrPassText, ParallelizeMovesTheFilterGradientCopyIntoTheBatch) {
  const Target t = avx2_target(1 << 20);
  ConvProblem p = nchw_backprop_filter();
  p.n = 2;
  const LoopNest blocked =
      block_reduction(register_tile(channels_last_out_backprop(lower(p), t), t), t);
  EXPECT_EQ(print(parallelize(blocked, t)), R"(kernel backprop_filter float32 NCHW "dyc r2x8 blk=n priv=x1"
buffer x X float32 dims [2, 3, 3, 2] strides [18, 3, 1, 9]
buffer dw W float32 dims [1, 2, 2, 8] strides [32, 16, 8, 1]
buffer dy Y float32 dims [2, 3, 2, 8] strides [48, 2, 1, 6]
buffer dyc scratch float32 dims [1, 3, 2, 8] strides [48, 16, 8, 1]
for zkh in [0, 1):
  for zkw in [0, 2):
    for zi in [0, 2):
      for zo in [0, 8):
        store dw[zkh, zkw, zi, zo] = 0
for nb in [0, 2) "batch":
  for coh in [0, 3):
    for cow in [0, 2):
      for co in [0, 8):
        store dyc[0, coh, cow, co] = dy[nb, coh, cow, co]
  for ob in [0, 1) "row chunks":
    for kh in [0, 1):
      for kw in [0, 2):
        for o in [0, 8) step 8:
          for i in [0, 2) step 2:
            tile r:2 x v:8
              reduce oh in [0, 3) ow in [0, 2)
              guard 0 <= kh + oh + 3*ob < 3
              guard 0 <= kw + ow < 3
              dw[kh, kw, i + r, o + v] += x[nb, kh + oh + 3*ob, kw + ow, i + r] * dyc[0, oh + 3*ob, ow, o + v]
)");
}

// dX of a 1x8x2x2 NCHW input, 1x2x8x8 filter, VALID: 8 channels each way fill AVX2 vectors.
ConvProblem nchw_backprop_data() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.format = DataFormat::kNCHW;
  p.n = 1;
  p.ih = p.iw = 2;
  p.ic = p.filter_in = 8;
  p.kh = 1;
  p.kw = 2;
  p.oc = 8;
  p.oh = 2;
  p.ow = 1;
  return p;
}

TEST(IrPassText, ChannelsLastBackpropDataRunsTheNhwcNestBetweenTwoCopies) {
  const Target t = avx2_target(1 << 20);
  EXPECT_EQ(print(channels_last_backprop_data(lower(nchw_backprop_data()), t)), R"(kernel backprop_data float32 NHWC "tonhwc"
buffer dxc scratch float32 dims [1, 2, 2, 8] strides [32, 16, 8, 1]
buffer w W float32 dims [1, 2, 8, 8] strides [128, 64, 8, 1]
buffer dyc scratch float32 dims [1, 2, 1, 8] strides [16, 8, 8, 1]
buffer dx X float32 dims [1, 2, 2, 8] strides [32, 2, 1, 4]
buffer dy Y float32 dims [1, 2, 1, 8] strides [16, 1, 1, 2]
for cn in [0, 1):
  for coh in [0, 2):
    for cow in [0, 1):
      for co in [0, 8):
        store dyc[cn, coh, cow, co] = dy[cn, coh, cow, co]
for n in [0, 1):
  for ih in [0, 2):
    for iw in [0, 2):
      for i in [0, 8):
        tile r:1 x v:1
          reduce kh in [0, 1) kw in [0, 2) o in [0, 8)
          guard 0 <= ih - kh < 2
          guard 0 <= iw - kw < 1
          dxc[n, ih, iw, i] = dyc[n, ih - kh, iw - kw, o] * w[kh, kw, i, o]
for fn in [0, 1):
  for fih in [0, 2):
    for fi in [0, 8):
      for fiw in [0, 2):
        store dx[fn, fih, fiw, fi] = dxc[fn, fih, fiw, fi]
)");
  // A 1x1 filter at stride 1 keeps its NCHW nest: no window to outgrow L1, no copies.
  ConvProblem pointwise = nchw_backprop_data();
  pointwise.kw = 1;
  pointwise.ow = 2;
  const LoopNest kept = channels_last_backprop_data(lower(pointwise), t);
  EXPECT_EQ(kept.problem.format, DataFormat::kNCHW);
  EXPECT_EQ(print(kept), print(lower(pointwise)));
}

// The NCHW input gradient's channels-last copies of a batch of 3 on one thread: each image is
// copied in, computed and copied out before the next, so both scratches hold one image.
TEST(IrPassText, PrivatizeBatchCopiesWalksImagesThroughOneSlotPerThread) {
  const Target t = avx2_target(1 << 20);
  ConvProblem p = nchw_backprop_data();
  p.n = 3;
  EXPECT_EQ(print(privatize_batch_copies(channels_last_backprop_data(lower(p), t), t)), R"(kernel backprop_data float32 NHWC "tonhwc priv=x1"
buffer dxc scratch float32 dims [1, 2, 2, 8] strides [32, 16, 8, 1]
buffer w W float32 dims [1, 2, 8, 8] strides [128, 64, 8, 1]
buffer dyc scratch float32 dims [1, 2, 1, 8] strides [16, 8, 8, 1]
buffer dx X float32 dims [3, 2, 2, 8] strides [32, 2, 1, 4]
buffer dy Y float32 dims [3, 2, 1, 8] strides [16, 1, 1, 2]
for chunk in [0, 1) "image chunks":
  for nb in [0, 3) "images":
    for coh in [0, 2):
      for cow in [0, 1):
        for co in [0, 8):
          store dyc[chunk, coh, cow, co] = dy[3*chunk + nb, coh, cow, co]
    for ih in [0, 2):
      for iw in [0, 2):
        for i in [0, 8):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 2) o in [0, 8)
            guard 0 <= ih - kh < 2
            guard 0 <= iw - kw < 1
            dxc[chunk, ih, iw, i] = dyc[chunk, ih - kh, iw - kw, o] * w[kh, kw, i, o]
    for fih in [0, 2):
      for fi in [0, 8):
        for fiw in [0, 2):
          store dx[3*chunk + nb, fih, fiw, fi] = dxc[chunk, fih, fiw, fi]
)");
  // Two threads and five images: two per thread through slots [0, 2), the fifth after them.
  p.ih = p.iw = p.oh = 64;
  p.ow = 63;
  p.n = 5;
  Target two = t;
  two.num_threads = 2;
  const LoopNest split = privatize_batch_copies(channels_last_backprop_data(lower(p), two), two);
  EXPECT_EQ(split.schedule_summary, "tonhwc priv=x2");
  for (const char* name : {"dxc", "dyc"}) {
    for (const Buffer& b : split.buffers) {
      if (b.name == name) EXPECT_EQ(b.dims.front(), 2) << name;
    }
  }
  ASSERT_EQ(split.body.size(), 2u);
  EXPECT_EQ(std::get<Loop>(split.body[0].node).label, "image chunks");
  EXPECT_EQ(std::get<Loop>(split.body[1].node).label, "images left");
  EXPECT_EQ(std::get<Loop>(split.body[1].node).trip_count(), 1);
}

TEST(IrPassText, PipelineReportsEveryPassInOrder) {
  std::vector<std::string> seen;
  lower_and_schedule(strided_backprop_data(), Target::generic(1),
                     [&](std::string_view name, const LoopNest&) { seen.emplace_back(name); });
  const std::vector<std::string> want = {"lower",
                                         "channels_last_backprop_data",
                                         "position_vectors",
                                         "copy_channels_first_out_backprop",
                                         "stride_residue_split",
                                         "pad_transposed_out_backprop",
                                         "border_peel",
                                         "pack_filter",
                                         "block_channels",
                                         "deinterleave_multiplier",
                                         "channels_last_out_backprop",
                                         "widen_depthwise_operands",
                                         "register_tile",
                                         "pair_reduction",
                                         "block_reduction",
                                         "merge_equal_parts",
                                         "privatize_batch_copies",
                                         "stream_output_stores",
                                         "parallelize",
                                         "copy_batch_operands"};
  EXPECT_EQ(seen, want);
}

// Four kh parts of a filter gradient's row chunk, as border_peel leaves them (the top and
// bottom single iterations carry their constant kh, the interior its variable) but reducing
// over the same rows, become one loop over kh (the two top rows join once the interior has
// given them a variable); a part that reduces over other rows stays on its own, and so does a
// part that does not start where the merged loop ends.
TEST(IrPassText, MergeEqualPartsJoinsPartsThatAreTheSameCode) {
  LoopNest nest;
  nest.problem.direction = ConvDirection::kBackpropFilter;
  nest.buffers = {Buffer{"x", BufferKind::kX, DType::kFloat32, {1, 8, 1, 1}, {8, 1, 1, 1}},
                  Buffer{"dw", BufferKind::kW, DType::kFloat32, {5, 1, 1, 1}, {1, 1, 1, 1}},
                  Buffer{"dy", BufferKind::kY, DType::kFloat32, {1, 8, 1, 1}, {8, 1, 1, 1}}};
  const VarId kh = nest.new_var("kh"), oh = nest.new_var("oh"), r = nest.new_var("r"),
              v = nest.new_var("v");
  const Affine zero = Affine::constant_of(0);
  auto part = [&](std::int64_t b, std::int64_t e, std::int64_t oh_end, const char* label) {
    Tile t;
    t.row_var = r;
    t.col_var = v;
    t.reduce = {ReduceLoop{oh, 1, oh_end, 1}};
    t.accumulate = true;
    t.a = Access{0, {zero, Affine::var(kh) + Affine::var(oh) - Affine::constant_of(1), zero, zero}};
    t.b = Access{2, {zero, Affine::var(oh), zero, zero}};
    t.c = Access{1, {Affine::var(kh), zero, zero, zero}};
    Loop l;
    l.var = kh;
    l.begin = b;
    l.end = e;
    l.label = label;
    l.body.push_back(Stmt{std::move(t)});
    if (std::string_view(label) != "interior") substitute(l.body, kh, Affine::constant_of(b));
    return Stmt{std::move(l)};
  };
  nest.body = {part(0, 1, 4, "top"),    part(1, 2, 4, "top"),    part(2, 3, 4, "interior"),
               part(3, 4, 4, "bottom"), part(4, 5, 3, "bottom"), part(0, 1, 3, "again")};
  EXPECT_EQ(print(merge_equal_parts(std::move(nest), Target::generic(1))), R"(kernel backprop_filter float32 NHWC
buffer x X float32 dims [1, 8, 1, 1] strides [8, 1, 1, 1]
buffer dw W float32 dims [5, 1, 1, 1] strides [1, 1, 1, 1]
buffer dy Y float32 dims [1, 8, 1, 1] strides [8, 1, 1, 1]
for kh in [0, 4) "top..bottom":
  tile r:1 x v:1
    reduce oh in [1, 4)
    dw[kh, 0, 0, 0] += x[0, kh + oh - 1, 0, 0] * dy[0, oh, 0, 0]
for kh in [4, 5) "bottom":
  tile r:1 x v:1
    reduce oh in [1, 3)
    dw[4, 0, 0, 0] += x[0, oh + 3, 0, 0] * dy[0, oh, 0, 0]
for kh in [0, 1) "again":
  tile r:1 x v:1
    reduce oh in [1, 3)
    dw[0, 0, 0, 0] += x[0, oh - 1, 0, 0] * dy[0, oh, 0, 0]
)");
}

// dX of a 1x1x2x3 input through a 1x1x3x4 filter, VALID.
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
Target bf16_dot_target() {
  Target t = Target::generic(1);
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
  const Target t = bf16_dot_target();
  EXPECT_EQ(print(pair_reduction(pack_filter(lower(p), t), t)), R"(kernel backprop_data bfloat16 NHWC "pack dp2"
buffer dx X bfloat16 dims [1, 1, 2, 3] strides [6, 6, 3, 1]
buffer w W bfloat16 dims [1, 1, 3, 4] strides [12, 12, 4, 1]
buffer dy Y bfloat16 dims [1, 1, 2, 4] strides [8, 8, 4, 1]
buffer wp scratch bfloat16 dims [1, 1, 2, 3, 2] strides [12, 12, 6, 2, 1]
for pkh in [0, 1):
  for pkw in [0, 1):
    for po in [0, 2):
      for pi in [0, 3):
        store wp[pkh, pkw, po, pi, 0] = w[pkh, pkw, pi, 2*po]
      for pi in [0, 3):
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
  const LoopNest packed = pack_filter(lower(p), t);
  Target no_bf16 = t;
  no_bf16.has_avx512_bf16 = false;
  EXPECT_EQ(print(pair_reduction(packed, no_bf16)), print(packed));
  p.oc = 3;
  const LoopNest odd = pack_filter(lower(p), t);
  EXPECT_EQ(print(pair_reduction(odd, t)), print(odd));
}

// A 16-bit filter the target multiplies in float32 is widened by the packing copy (f16 always,
// bf16 without avx512_bf16), so the tiles load float32 vectors; a bf16 filter the dot product
// takes stays bf16 (pair_reduction packs it in pairs), and float32 stays float32.
TEST(IrPassText, PackFilterWidensFiltersTheTargetMultipliesInFloat32) {
  ConvProblem p = tiny_backprop_data(DType::kFloat32);
  Target avx2 = Target::generic(1);
  avx2.isa = Isa::kAvx2;
  avx2.vector_bytes = 32;
  avx2.vector_registers = 16;
  const Target bf16_dot = bf16_dot_target();
  auto packed_dtype = [&](DType dtype, const Target& t) {
    p.dtype = dtype;
    const LoopNest n = pack_filter(lower(p), t);
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
  const std::string text = print(pack_filter(lower(p), avx2));
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
    Target t = Target::generic(1);
    t.isa = Isa::kAvx512;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_fma = true;
    if (avx2) t = avx2_target(1 << 20);
    std::int64_t rows = 0;
    LoopNest nest = register_tile(border_peel(lower(p), t), t);
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
  const Target t = avx2_target(1 << 20);
  LoopNest n = stride_residue_split(position_vectors(lower(p), t), t);
  EXPECT_EQ(print(pad_transposed_out_backprop(std::move(n), t)), R"(kernel backprop_data float32 NHWC "wvec res2x2 zpad"
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
  const Target t = avx2_target(1 << 20);
  LoopNest n = copy_channels_first_out_backprop(lower(nchw_depthwise_backprop_data()), t);
  EXPECT_EQ(print(pad_transposed_out_backprop(std::move(n), t)),
            R"(kernel backprop_data float32 NCHW "dyp zpad"
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
  Target t = avx2_target(1 << 20);
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
  const Target t = avx2_target(1 << 20);
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

// Stride 2: each dy column is copied twice and the taps go in pairs against per-column
// weights packed once per call (pad_left is 1: even columns take w's taps 1 and, past the
// filter, a zero; odd ones taps 0 and 2), so the tile reads both operands along dx's column
// and the residue split leaves W alone.
TEST(IrPassText, CopyChannelsFirstOutBackpropRepeatsColumnsAtStride2) {
  ConvProblem p = nchw_depthwise_backprop_data();
  p.iw = 5;
  p.ow = 3;
  p.ih = 4;
  p.oh = 2;
  p.stride_h = p.stride_w = 2;
  p.pad_top = 0;
  p.pad_left = 1;
  p.pad_bottom = p.pad_right = 1;
  const Target t = avx2_target(1 << 20);
  EXPECT_EQ(print(copy_channels_first_out_backprop(lower(p), t)),
            R"(kernel backprop_data float32 NCHW "dyp2"
buffer dx X float32 dims [1, 4, 5, 2] strides [40, 5, 1, 20]
buffer w W float32 dims [3, 3, 1, 4] strides [12, 4, 4, 1]
buffer dy Y float32 dims [1, 2, 3, 4] strides [24, 3, 1, 6]
buffer dyp scratch float32 dims [1, 2, 6, 2] strides [24, 6, 1, 12]
buffer wl scratch float32 dims [3, 2, 4, 6] strides [48, 24, 6, 1]
for lkh in [0, 3):
  for lc in [0, 4):
    for lw in [0, 3):
      store wl[lkh, 0, lc, 2*lw] = w[lkh, 1, 0, lc]
      store wl[lkh, 0, lc, 2*lw + 1] = w[lkh, 0, 0, lc]
      store wl[lkh, 1, lc, 2*lw] = 0
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
  const Target t = avx2_target(1 << 20);
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

StreamCount count_streamed(const ConvProblem& p, const Target& t) {
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
  Target t = avx2_target(1 << 20);
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
  Target t = avx2_target(1 << 20);
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
}  // namespace convjit::ir
