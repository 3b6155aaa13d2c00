// Text tests of lowering and the target-independent transforms: the exact IR before and after
// on small problems. The expected texts were checked by hand against the formulas in
// SEMANTICS.md: they pin down the schedule's shape (which taps each residue and border keeps),
// not just its numerical result, which ir_schedule_sweep_test checks.
#include <gtest/gtest.h>

#include "ir/lower.hpp"
#include "ir/printer.hpp"
#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"
#include "support/ir_test_problems.hpp"

namespace convjit::ir {
namespace {

using convjit::testing::strided_backprop_data;

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
  EXPECT_EQ(print(stride_residue_split(lower(strided_backprop_data()))), R"(kernel backprop_data float32 NHWC
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

TEST(IrPassText, BorderPeelTightensBorderTapsAndClearsTheInterior) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = p.iw = p.oh = p.ow = 4;
  p.ic = p.filter_in = p.oc = 2;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  EXPECT_EQ(print(border_peel(stride_residue_split(lower(p)))), R"(kernel backprop_data float32 NHWC
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
  EXPECT_EQ(print(merge_equal_parts(std::move(nest))), R"(kernel backprop_filter float32 NHWC
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
}  // namespace
}  // namespace convjit::ir
