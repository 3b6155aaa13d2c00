// Text tests of the CPU schedule passes on small problems: the exact IR each pass makes, for
// plans made on generic and AVX2 cores built by hand (so they hold on any host). The expected
// texts were checked by hand against the formulas in SEMANTICS.md: they pin down the
// schedule's shape (tile sizes, channel blocks, the chunked reduction, the operand copies),
// not just its numerical result, which ir_schedule_sweep_test checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "codegen/cpu/cpu_pipeline.hpp"
#include "codegen/cpu/kernel_name.hpp"
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
using testing::avx512_bf16_target;
using testing::generic_target;
using testing::lower_and_schedule;
using testing::run;
using testing::TestTarget;

TEST(IrPassText, PackFilterAndRegisterTile) {
  const TestTarget t = generic_target(1);
  LoopNest n = border_peel(stride_residue_split(lower(strided_backprop_data())));
  EXPECT_EQ(print(run(register_tile, run(pack_filter, std::move(n), t), t)), R"(kernel backprop_data float32 NHWC
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

TEST(IrPassText, RegisterTileAddsRowAndColumnTails) {
  ConvProblem p;
  p.direction = ConvDirection::kForward;
  p.n = p.ih = p.oh = p.kh = p.kw = 1;
  p.iw = p.ow = 17;
  p.ic = p.filter_in = 16;
  p.oc = 5;
  const TestTarget t = generic_target(1);
  EXPECT_EQ(print(run(register_tile, border_peel(lower(p)), t)), R"(kernel forward float32 NHWC
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
  // The split alone, as parallelize carries out a plan that splits n in four without blocking
  // the reduction first (for this size the planner would block it too: see block_reduction).
  // The partial sums add up row by row of output channels (each row one vectorizable store
  // loop), under a top-level loop the threads share: a 1x1 filter's kh and kw get no loops.
  CpuPlan t = testing::plan_for(p, generic_target(4));
  t.reduction_blocking = ReductionBlocking::kNone;
  t.columns_outside_rows = false;
  t.reduction_split = ReductionSplit::kDims;
  t.split_dim = 0;
  t.split_chunks = 4;
  EXPECT_EQ(print(parallelize(split_reduction(register_tile(border_peel(lower(p)), t), t), t)),
            R"(kernel backprop_filter float32 NHWC
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
for ri in [0, 2) parallel:
  for rc in [1, 4):
    for ro in [0, 3):
      store partial[0, 0, 0, ri, ro] += partial[rc, 0, 0, ri, ro]
  for ro in [0, 3):
    store dw[0, 0, ri, ro] = partial[0, 0, 0, ri, ro]
)");
  // One thread, or a tiny problem, stays serial and unsplit.
  const CpuPlan one = testing::plan_for(p, generic_target(1));
  const LoopNest serial = parallelize(register_tile(border_peel(lower(p)), one), one);
  EXPECT_EQ(serial.buffer_of_kind(BufferKind::kScratch), -1);
  EXPECT_EQ(schedule_tokens(one, serial), "r2x3");
}

TEST(IrPassText, EmptyProblemLowersToAZeroFill) {
  ConvProblem p = strided_backprop_data();
  p.oc = 0;
  EXPECT_EQ(print(lower_and_schedule(p, generic_target(4))),
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

// Channel blocks go around each row when the packed filter stays in L2 and the filter is one
// column wide (no border columns to tile down H).
TEST(IrPassText, BlockChannelsAroundEachRowWhenTheFilterStaysInL2) {
  const TestTarget t = avx2_target(1 << 20);
  ConvProblem one_column = wide_backprop_data();
  one_column.kw = 1;
  one_column.ow = 4;
  LoopNest n = run(pack_filter, border_peel(lower(one_column)), t);
  EXPECT_EQ(print(run(block_channels, std::move(n), t)), R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 2, 4, 72] strides [576, 288, 72, 1]
buffer w W float32 dims [1, 1, 72, 3] strides [216, 216, 3, 1]
buffer dy Y float32 dims [1, 2, 4, 3] strides [24, 12, 3, 1]
buffer wp scratch float32 dims [2, 1, 1, 3, 40] strides [120, 120, 120, 40, 1]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 1):
      for po in [0, 3):
        for pi in [0, 40):
          store wp[pb, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi, po]
for pb in [0, 1):
  for pkh in [0, 1):
    for pkw in [0, 1):
      for po in [0, 3):
        for pi in [0, 32):
          store wp[pb + 1, pkh, pkw, po, pi] = w[pkh, pkw, 40*pb + pi + 40, po]
for n in [0, 1):
  for ih in [0, 2) "interior":
    for cb in [0, 1) "channel blocks":
      for iw in [0, 4):
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
    for cb in [1, 2) "channel tail":
      for iw in [0, 4):
        for i in [0, 32):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
)");
}

// Sunk inside the pixel loops (channel_blocks_inside_pixels), each block loop goes right above
// the column loops: the tail's block gets loops of its own.
TEST(IrPassText, ChannelBlocksInsidePixelsSinksEachBlockLoopToTheColumns) {
  const TestTarget t = avx2_target(1 << 20);
  ConvProblem one_column = wide_backprop_data();
  one_column.kw = 1;
  one_column.ow = 4;
  LoopNest n = run(block_channels, run(pack_filter, border_peel(lower(one_column)), t), t);
  const std::string text = print(run(channel_blocks_inside_pixels, std::move(n), t));
  EXPECT_NE(text.find(R"(for n in [0, 1):
  for ih in [0, 2) "interior":
    for iw in [0, 4):
      for cb in [0, 1) "channel blocks":
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[n, ih, iw, i + 40*cb] = dy[n, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
    for iw in [0, 4):
      for cb in [1, 2) "channel tail":
        for i in [0, 32):
          tile r:1 x v:1
)"),
            std::string::npos)
      << text;
}

// With border columns (a 2-wide filter) the blocks go around the image even where the filter
// stays in L2: border_columns_as_rows needs the image's rows inside each block.
TEST(IrPassText, BlockChannelsAroundTheImageWhereBorderColumnsGoDownH) {
  const TestTarget t = avx2_target(1 << 20);
  LoopNest n = run(pack_filter, border_peel(lower(wide_backprop_data())), t);
  const std::string text = print(run(block_channels, std::move(n), t));
  EXPECT_NE(text.find(R"(  for cb in [0, 1) "channel blocks":
    for ih in [0, 2) "interior":)"),
            std::string::npos)
      << text;
}

TEST(IrPassText, BlockChannelsAroundTheImageWhenTheFilterOutgrowsL2) {
  const TestTarget t = avx2_target(1024);
  LoopNest n = run(pack_filter, border_peel(lower(wide_backprop_data())), t);
  EXPECT_EQ(print(run(block_channels, std::move(n), t)), R"(kernel backprop_data float32 NHWC
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

// Past L2, the blocks around the image go around each thread's chunk of images instead
// (channel_blocks_around_batch): 5 images on 2 threads make chunks of 2 inside every block,
// and the image left over keeps its blocks around it.
TEST(IrPassText, ChannelBlocksAroundBatchWalkEachThreadsImagesInsideEveryBlock) {
  const TestTarget t = avx2_target(1024);
  ConvProblem one_column = wide_backprop_data();
  one_column.n = 5;
  one_column.kw = 1;
  one_column.ow = 4;
  LoopNest n = run(block_channels, run(pack_filter, border_peel(lower(one_column)), t), t);
  // Two threads (the plan gives a problem this small one).
  CpuPlan plan = plan_for(n.problem, t);
  plan.threads = 2;
  const std::string text = print(channel_blocks_around_batch(std::move(n), plan));
  EXPECT_NE(text.find(R"(for chunk in [0, 2) "image chunks":
  for cb in [0, 1) "channel blocks":
    for nb in [0, 2) "images":
      for ih in [0, 2) "interior":
        for iw in [0, 4):
          for i in [0, 40):
            tile r:1 x v:1
              reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
              dx[2*chunk + nb, ih, iw, i + 40*cb] = dy[2*chunk + nb, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
  for cb in [1, 2) "channel tail":
    for nb in [0, 2) "images":
      for ih in [0, 2) "interior":
        for iw in [0, 4):
          for i in [0, 32):
            tile r:1 x v:1
              reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
              dx[2*chunk + nb, ih, iw, i + 40*cb] = dy[2*chunk + nb, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
for nr in [0, 1) "images left":
  for cb in [0, 1) "channel blocks":
    for ih in [0, 2) "interior":
      for iw in [0, 4):
        for i in [0, 40):
          tile r:1 x v:1
            reduce kh in [0, 1) kw in [0, 1) o in [0, 3)
            dx[nr + 4, ih, iw, i + 40*cb] = dy[nr + 4, ih - kh, iw - kw, o] * wp[cb, kh, kw, o, i]
)"),
            std::string::npos)
      << text;
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
  const TestTarget t = avx2_target(1 << 20);
  EXPECT_EQ(print(run(channels_last_out_backprop, lower(nchw_backprop_filter()), t)), R"(kernel backprop_filter float32 NCHW
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
  EXPECT_GE(run(channels_last_out_backprop, lower(few), t).buffer_of_role(BufferRole::kOutBackpropCopy), 0);
  ConvProblem one = nchw_backprop_filter();
  one.oc = 1;
  EXPECT_EQ(run(channels_last_out_backprop, lower(one), t).buffer_of_role(BufferRole::kOutBackpropCopy), -1);
}

// The NCHW filter gradient of 2 images on one thread: dy's channels-last copy moves into the
// batch loop, one image at a time into the single slot its tiles then read.
TEST(IrPassText, ParallelizeMovesTheFilterGradientCopyIntoTheBatch) {
  const TestTarget t = avx2_target(1 << 20);
  ConvProblem p = nchw_backprop_filter();
  p.n = 2;
  const LoopNest blocked =
      run(block_reduction, run(register_tile, run(channels_last_out_backprop, lower(p), t), t), t);
  EXPECT_EQ(print(run(parallelize, blocked, t)), R"(kernel backprop_filter float32 NCHW
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
  const TestTarget t = avx2_target(1 << 20);
  EXPECT_EQ(print(run(channels_last_copies, lower(nchw_backprop_data()), t)), R"(kernel backprop_data float32 NHWC
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
  const LoopNest kept = run(channels_last_copies, lower(pointwise), t);
  EXPECT_EQ(kept.problem.format, DataFormat::kNCHW);
  EXPECT_EQ(print(kept), print(lower(pointwise)));
}

// The forward op on the same tensors: x copied channels-last before the tiles, y copied back
// after; its 1x1 filters take the copies too (their NCHW tiles ran at a third of NHWC's).
TEST(IrPassText, ChannelsLastForwardCopiesXInAndYOut) {
  const TestTarget t = avx2_target(1 << 20);
  ConvProblem forward = nchw_backprop_data();
  forward.direction = ConvDirection::kForward;
  EXPECT_EQ(print(run(channels_last_copies, lower(forward), t)), R"(kernel forward float32 NHWC
buffer xc scratch float32 dims [1, 2, 2, 8] strides [32, 16, 8, 1]
buffer w W float32 dims [1, 2, 8, 8] strides [128, 64, 8, 1]
buffer yc scratch float32 dims [1, 2, 1, 8] strides [16, 8, 8, 1]
buffer x X float32 dims [1, 2, 2, 8] strides [32, 2, 1, 4]
buffer y Y float32 dims [1, 2, 1, 8] strides [16, 1, 1, 2]
for cn in [0, 1):
  for cih in [0, 2):
    for ciw in [0, 2):
      for ci in [0, 8):
        store xc[cn, cih, ciw, ci] = x[cn, cih, ciw, ci]
for n in [0, 1):
  for oh in [0, 2):
    for ow in [0, 1):
      for o in [0, 8):
        tile r:1 x v:1
          reduce kh in [0, 1) kw in [0, 2) i in [0, 8)
          guard 0 <= oh + kh < 2
          guard 0 <= ow + kw < 2
          yc[n, oh, ow, o] = xc[n, oh + kh, ow + kw, i] * w[kh, kw, i, o]
for fn in [0, 1):
  for foh in [0, 2):
    for fo in [0, 8):
      for fow in [0, 1):
        store y[fn, foh, fow, fo] = yc[fn, foh, fow, fo]
)");
  forward.kw = 1;
  forward.ow = 2;
  EXPECT_EQ(run(channels_last_copies, lower(forward), t).problem.format, DataFormat::kNHWC);
}

// The NCHW depthwise filter gradient runs NHWC's channel-vector tiles on channels-last copies
// of x and dy, in f32 for bfloat16 (widened once), each image copied into its thread's slot
// inside the batch loop the split made: the scratches hold one image per thread.
TEST(IrPassText, ChannelsLastDepthwiseFilterGradientCopiesXAndDyPerImageSlot) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropFilter;
  p.format = DataFormat::kNCHW;
  p.depthwise = true;
  p.dtype = DType::kBFloat16;
  p.n = 4;
  p.ih = p.iw = p.oh = p.ow = 24;
  p.ic = p.oc = p.groups = 16;
  p.filter_in = 1;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  TestTarget t = avx2_target(1 << 20);
  t.num_threads = 2;
  const std::string text = print(lower_and_schedule(p, t));
  for (const char* expected :
       {"buffer xc scratch float32 dims [2, 24, 24, 16] strides [9216, 384, 16, 1]",
        "buffer dyc scratch float32 dims [2, 24, 24, 16] strides [9216, 384, 16, 1]",
        "for chunk in [0, 2) parallel:", "  for nb in [0, 2) \"batch\":",
        "          store dyc[chunk, yoh, yow, yo] = dy[nb + 2*chunk, yoh, yow, yo]",
        "          store xc[chunk, xih, xiw, xi] = x[nb + 2*chunk, xih, xiw, xi]"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
  // Every tile reads the copies, none the caller's NCHW tensors.
  EXPECT_EQ(text.find("* dy["), std::string::npos) << text;
  EXPECT_EQ(text.find("+= x["), std::string::npos) << text;
  EXPECT_NE(text.find("+= xc[chunk, "), std::string::npos) << text;
}

// A depthwise filter gradient's filter columns over the columns of ow where all three lie
// inside x: one kw loop that register_tile gives three rows against one shared dy vector.
// The border columns on either side are parts of their own that border_peel splits by kw; the
// first part writes dW, the later ones add to it.
TEST(IrPassText, TapsShareOutBackpropKeepsTheFilterColumnsWholeOverTheInterior) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropFilter;
  p.depthwise = true;
  p.n = 1;
  p.ih = p.iw = p.oh = p.ow = 12;
  p.ic = p.oc = p.groups = 8;
  p.filter_in = 1;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  const TestTarget t = avx2_target(1 << 20);
  ASSERT_TRUE(testing::plan_for(p, t).taps_share_out_backprop);
  LoopNest split = run(taps_share_out_backprop, lower(p), t);
  EXPECT_EQ(print(split), R"(kernel backprop_filter float32 NHWC
buffer x X float32 dims [1, 12, 12, 8] strides [1152, 96, 8, 1]
buffer dw W float32 dims [3, 3, 1, 8] strides [24, 8, 8, 1]
buffer dy Y float32 dims [1, 12, 12, 8] strides [1152, 96, 8, 1]
for kh in [0, 3):
  for kw in [0, 3):
    for g in [0, 8):
      tile r:1 x v:1
        reduce n in [0, 1) oh in [0, 12) ow in [0, 1)
        guard 0 <= kh + oh - 1 < 12
        guard 0 <= kw + ow - 1 < 12
        dw[kh, kw, 0, g] = x[n, kh + oh - 1, kw + ow - 1, g] * dy[n, oh, ow, g]
  for kw in [0, 3):
    for g in [0, 8):
      tile r:1 x v:1
        reduce n in [0, 1) oh in [0, 12) ow in [1, 11)
        guard 0 <= kh + oh - 1 < 12
        dw[kh, kw, 0, g] += x[n, kh + oh - 1, kw + ow - 1, g] * dy[n, oh, ow, g]
  for kw in [0, 3):
    for g in [0, 8):
      tile r:1 x v:1
        reduce n in [0, 1) oh in [0, 12) ow in [11, 12)
        guard 0 <= kh + oh - 1 < 12
        guard 0 <= kw + ow - 1 < 12
        dw[kh, kw, 0, g] += x[n, kh + oh - 1, kw + ow - 1, g] * dy[n, oh, ow, g]
)");
  // The interior's tiles take the three filter columns as rows.
  const std::string text = print(lower_and_schedule(p, t));
  EXPECT_NE(text.find("tile r:3 x v:8"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce n in [0, 1) oh in [0, 12) ow in [1, 11)"), std::string::npos) << text;
}

// The NCHW input gradient's channels-last copies of a batch of 3 on one thread: each image is
// copied in, computed and copied out before the next, so both scratches hold one image.
TEST(IrPassText, PrivatizeBatchCopiesWalksImagesThroughOneSlotPerThread) {
  ConvProblem p = nchw_backprop_data();
  p.n = 3;
  // One plan for the NCHW problem serves both passes (after the first the nest is NHWC's).
  const CpuPlan t = testing::plan_for(p, avx2_target(1 << 20));
  EXPECT_EQ(print(privatize_batch_copies(channels_last_copies(lower(p), t), t)), R"(kernel backprop_data float32 NHWC
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
  TestTarget two_threads = avx2_target(1 << 20);
  two_threads.num_threads = 2;
  const CpuPlan two = testing::plan_for(p, two_threads);
  const LoopNest split = privatize_batch_copies(channels_last_copies(lower(p), two), two);
  EXPECT_TRUE(two.channels_last_copies && two.privatize_batch_copies && two.threads == 2);
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

// A 3x3 SAME input gradient on a 4x4 image: border_peel leaves each interior row's two border
// columns as W loops of one position; border_columns_as_rows gives each its own H loop with the
// position substituted, so register_tile tiles the two rows of each border column together.
TEST(IrPassText, BorderColumnsAsRowsTilesTheBorderColumnsDownH) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = p.iw = p.oh = p.ow = 4;
  p.ic = p.filter_in = 8;
  p.kh = p.kw = 3;
  p.oc = 2;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  const TestTarget t = avx2_target(1 << 20);
  ASSERT_TRUE(testing::plan_for(p, t).border_columns_as_rows);
  LoopNest n = run(pack_filter, border_peel(lower(p)), t);
  n = run(register_tile, run(border_columns_as_rows, std::move(n), t), t);
  EXPECT_EQ(print(n), R"(kernel backprop_data float32 NHWC
buffer dx X float32 dims [1, 4, 4, 8] strides [128, 32, 8, 1]
buffer w W float32 dims [3, 3, 8, 2] strides [48, 16, 2, 1]
buffer dy Y float32 dims [1, 4, 4, 2] strides [32, 8, 2, 1]
buffer wp scratch float32 dims [3, 3, 2, 8] strides [48, 16, 8, 1]
for pkh in [0, 3):
  for pkw in [0, 3):
    for po in [0, 2):
      for pi in [0, 8):
        store wp[pkh, pkw, po, pi] = w[pkh, pkw, pi, po]
for n in [0, 1):
  for ih in [0, 1) "top":
    for iw in [0, 1) "left":
      for i in [0, 8) step 8:
        tile r:1 x v:8
          reduce kh in [0, 2) kw in [0, 2) o in [0, 2)
          dx[n, 0, 0, i + v] = dy[n, -kh + 1, -kw + 1, o] * wp[kh, kw, o, i + v]
    for iw in [1, 3) step 2 "interior":
      for i in [0, 8) step 8:
        tile r:2 x v:8
          reduce kh in [0, 2) kw in [0, 3) o in [0, 2)
          dx[n, 0, iw + r, i + v] = dy[n, -kh + 1, iw + r - kw + 1, o] * wp[kh, kw, o, i + v]
    for iw in [3, 4) "right":
      for i in [0, 8) step 8:
        tile r:1 x v:8
          reduce kh in [0, 2) kw in [1, 3) o in [0, 2)
          dx[n, 0, 3, i + v] = dy[n, -kh + 1, -kw + 4, o] * wp[kh, kw, o, i + v]
  for ih in [1, 3) step 2 "interior":
    for i in [0, 8) step 8:
      tile r:2 x v:8
        reduce kh in [0, 3) kw in [0, 2) o in [0, 2)
        dx[n, ih + r, 0, i + v] = dy[n, ih + r - kh + 1, -kw + 1, o] * wp[kh, kw, o, i + v]
  for ih in [1, 3) "interior":
    for iw in [1, 3) step 2 "interior":
      for i in [0, 8) step 8:
        tile r:2 x v:8
          reduce kh in [0, 3) kw in [0, 3) o in [0, 2)
          dx[n, ih, iw + r, i + v] = dy[n, ih - kh + 1, iw + r - kw + 1, o] * wp[kh, kw, o, i + v]
  for ih in [1, 3) step 2 "interior":
    for i in [0, 8) step 8:
      tile r:2 x v:8
        reduce kh in [0, 3) kw in [1, 3) o in [0, 2)
        dx[n, ih + r, 3, i + v] = dy[n, ih + r - kh + 1, -kw + 4, o] * wp[kh, kw, o, i + v]
  for ih in [3, 4) "bottom":
    for iw in [0, 1) "left":
      for i in [0, 8) step 8:
        tile r:1 x v:8
          reduce kh in [1, 3) kw in [0, 2) o in [0, 2)
          dx[n, 3, 0, i + v] = dy[n, -kh + 4, -kw + 1, o] * wp[kh, kw, o, i + v]
    for iw in [1, 3) step 2 "interior":
      for i in [0, 8) step 8:
        tile r:2 x v:8
          reduce kh in [1, 3) kw in [0, 3) o in [0, 2)
          dx[n, 3, iw + r, i + v] = dy[n, -kh + 4, iw + r - kw + 1, o] * wp[kh, kw, o, i + v]
    for iw in [3, 4) "right":
      for i in [0, 8) step 8:
        tile r:1 x v:8
          reduce kh in [1, 3) kw in [1, 3) o in [0, 2)
          dx[n, 3, 3, i + v] = dy[n, -kh + 4, -kw + 4, o] * wp[kh, kw, o, i + v]
)");
  EXPECT_EQ(n.derived.at("border_columns_as_rows"), 2);
}

// The pass list is the plan's: the observer sees lowering, then exactly the passes the plan
// asks for, in order; another op on another core asks for others.
TEST(IrPassText, PipelineReportsEveryPassInOrder) {
  auto seen_for = [](const ConvProblem& p, const TestTarget& t) {
    std::vector<std::string> seen;
    lower_and_schedule(p, t, [&](std::string_view name, const LoopNest&) { seen.emplace_back(name); });
    std::vector<std::string> want = {"lower"};
    for (const auto& pass : cpu_passes(testing::plan_for(p, t))) want.emplace_back(pass.name);
    EXPECT_EQ(seen, want);
    return seen;
  };
  EXPECT_EQ(seen_for(strided_backprop_data(), generic_target(1)),
            (std::vector<std::string>{"lower", "stride_residue_split", "border_peel",
                                      "pack_filter", "register_tile", "merge_equal_parts",
                                      "parallelize"}));
  ConvProblem filter = nchw_backprop_filter();
  filter.n = 2;
  EXPECT_EQ(seen_for(filter, avx2_target(1 << 20)),
            (std::vector<std::string>{
                "lower", "stride_residue_split", "border_peel", "channels_last_out_backprop",
                "register_tile", "block_reduction", "merge_equal_parts", "prefetch_streamed_rows",
                "parallelize", "prefetch_next_blocks"}));
}

ConvProblem filter_gradient_1x1(std::int64_t n, std::int64_t hw, std::int64_t ic, std::int64_t oc) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropFilter;
  p.n = n;
  p.ih = p.iw = p.oh = p.ow = hw;
  p.ic = p.filter_in = ic;
  p.oc = oc;
  p.kh = p.kw = 1;
  return p;
}

bool reads_scratch(const LoopNest& nest, const Access& x) {
  return nest.buffers[static_cast<std::size_t>(x.buffer)].kind == BufferKind::kScratch;
}

// prefetch_next_blocks runs on the final operands: a tile that broadcasts from a copy of x
// (AVX2's padded-pixel copy of 256 channels) prefetches none of it (the copy's loop reads x),
// and prefetches dy, which it streams from beyond L2, one row chunk ahead.
TEST(IrPassText, FilterGradientTilesPrefetchWhatTheyStreamNotTheirCopies) {
  const ConvProblem p = filter_gradient_1x1(8, 56, 256, 64);
  LoopNest nest = lower_and_schedule(p, avx2_target(1 << 20));
  int copied_broadcasts = 0;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    if (!reads_scratch(nest, t.a) || reads_scratch(nest, t.b)) return;
    ++copied_broadcasts;
    EXPECT_EQ(t.prefetch_next_block_a, 0);
    // dy's pixels are 64 floats apart; its next block a whole number of them further.
    EXPECT_GT(t.prefetch_next_block_b, 0);
    EXPECT_EQ(t.prefetch_next_block_b % 64, 0);
  });
  EXPECT_GT(copied_broadcasts, 0) << print(nest);
}

// A prefetch distance never comes from a parallel loop: its next iteration is another thread's
// block. Two images on two threads (one each), 3x3 taps over 256x256x64 images: every tile's
// distance stays inside its own image.
TEST(IrPassText, FilterGradientPrefetchesStayOnTheirThread) {
  ConvProblem p = filter_gradient_1x1(2, 256, 64, 64);
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  TestTarget t = avx2_target(1 << 20);
  t.num_threads = 2;
  LoopNest nest = lower_and_schedule(p, t);
  const std::int64_t image = 256 * 256 * 64;
  bool parallel = false;
  for (const Stmt& s : nest.body) {
    const auto* l = std::get_if<Loop>(&s.node);
    parallel = parallel || (l != nullptr && l->kind == LoopKind::kParallel);
  }
  ASSERT_TRUE(parallel) << print(nest);
  int prefetching = 0;
  for_each_tile(nest.body, {}, [&](Tile& tile, const VarRanges&) {
    prefetching += tile.prefetch_next_block_a != 0 || tile.prefetch_next_block_b != 0;
    EXPECT_LT(std::llabs(tile.prefetch_next_block_a), image);
    EXPECT_LT(std::llabs(tile.prefetch_next_block_b), image);
  });
  EXPECT_GT(prefetching, 0) << print(nest);
}

// Where one tile reduces over every pixel (no loop moves past them), the tiles after it read
// the same pixels' next channels, and x takes a new line of each pixel every few steps of the
// rows loop. A 7x7 2064 -> 528 filter gradient on two Zen 4 cores (x 3.3 MB, beyond its 1 MiB
// L2; each thread half the input channels, over all 392 pixels; r50's 2048 -> 512, whose
// pixels crowd L1's sets, reads padded copies instead): every full tile prefetches the next
// line of its pixels' x; dy (0.8 MB in f32) stays in L2 and is not prefetched. At 256 input
// channels x fits L2 and nothing is prefetched.
TEST(IrPassText, TilesOverEveryPixelPrefetchTheirPixelsNextChannels) {
  TestTarget zen4 = avx512_bf16_target(/*amx=*/false, /*threads=*/2);
  zen4.l1_bytes = 32 << 10;
  zen4.l2_bytes = 1 << 20;
  zen4.llc_bytes = 32 << 20;
  zen4.fmas_per_cycle = 1;
  for (const DType dtype : {DType::kFloat32, DType::kFloat64}) {
    ConvProblem p = filter_gradient_1x1(8, 7, 2064, 528);
    p.dtype = dtype;
    LoopNest nest = lower_and_schedule(p, zen4);
    const std::int64_t line = CpuInfo::kCacheLineBytes / dtype_size(dtype);
    int marked = 0, columns_marked = 0;
    for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
      ASSERT_FALSE(reads_scratch(nest, t.a)) << print(nest);
      EXPECT_TRUE(t.prefetch_next_block_a == 0 || t.prefetch_next_block_a == line) << print(nest);
      // f64's dy, 1.6 MB, streams too: the next column block's lines of the same pixels.
      EXPECT_EQ(t.prefetch_next_block_b % line, 0) << print(nest);
      if (dtype == DType::kFloat32) EXPECT_EQ(t.prefetch_next_block_b, 0) << print(nest);
      marked += t.prefetch_next_block_a == line;
      columns_marked += t.prefetch_next_block_b > 0;
    });
    EXPECT_GT(marked, 0) << print(nest);
    if (dtype == DType::kFloat64) EXPECT_GT(columns_marked, 0) << print(nest);
  }
  LoopNest fits = lower_and_schedule(filter_gradient_1x1(8, 7, 256, 512), zen4);
  for_each_tile(fits.body, {}, [&](Tile& t, const VarRanges&) {
    EXPECT_EQ(t.prefetch_next_block_a, 0) << print(fits);
    EXPECT_EQ(t.prefetch_next_block_b, 0) << print(fits);
  });
}

}  // namespace
}  // namespace convjit::cpu
