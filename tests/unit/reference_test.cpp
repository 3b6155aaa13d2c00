// The naive reference on cases worked out by hand, a TensorFlow-hard-coded depthwise case, and
// the three directions cross-checked against each other on tiny shapes (adjoint identities and
// basis-vector probes), in both layouts and every dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "frontend/problem.hpp"
#include "reference/naive.hpp"
#include "convjit/numeric.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

using testing::TestTensor;

/// Geometry of one hand-built problem; output sizes follow SEMANTICS.md from the pads given.
struct Geometry {
  std::int64_t n = 1, ih = 1, iw = 1, ic = 1, kh = 1, kw = 1, filter_in = 1, oc = 1;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool depthwise = false;
};

ConvProblem make_problem(const Geometry& g, ConvDirection direction, DType dtype = DType::kFloat64,
                         DataFormat format = DataFormat::kNHWC) {
  ConvProblem p;
  p.op = direction == ConvDirection::kForward        ? OpKind::kConv2D
         : direction == ConvDirection::kBackpropData ? OpKind::kConv2DBackpropInput
                                                     : OpKind::kConv2DBackpropFilter;
  p.direction = direction;
  p.dtype = dtype;
  p.format = format;
  p.n = g.n;
  p.ih = g.ih;
  p.iw = g.iw;
  p.ic = g.ic;
  p.kh = g.kh;
  p.kw = g.kw;
  p.filter_in = g.filter_in;
  p.oc = g.oc;
  p.groups = g.ic / g.filter_in;
  p.stride_h = g.stride_h;
  p.stride_w = g.stride_w;
  p.dilation_h = g.dilation_h;
  p.dilation_w = g.dilation_w;
  p.pad_top = g.pad_top;
  p.pad_bottom = g.pad_bottom;
  p.pad_left = g.pad_left;
  p.pad_right = g.pad_right;
  p.depthwise = g.depthwise;
  p.oh = (g.ih + g.pad_top + g.pad_bottom - p.kh_eff() + g.stride_h) / g.stride_h;
  p.ow = (g.iw + g.pad_left + g.pad_right - p.kw_eff() + g.stride_w) / g.stride_w;
  return p;
}

std::vector<std::int64_t> shape_of(const ConvProblem& p, TensorRole role) {
  const auto s = p.shape(role);
  return {s.begin(), s.end()};
}

/// Tensors for the three roles; `fill` seeds the two inputs, the output starts as NaN so an
/// element the reference forgot to write shows up.
struct Operands {
  TestTensor x, w, y;
  OperandPointers pointers() { return {x.data(), w.data(), y.data()}; }
  TestTensor& get(TensorRole r) { return r == TensorRole::kX ? x : r == TensorRole::kW ? w : y; }
};

Operands random_operands(const ConvProblem& p, std::uint64_t seed) {
  Operands o{testing::random_tensor(p.dtype, shape_of(p, TensorRole::kX), seed),
             testing::random_tensor(p.dtype, shape_of(p, TensorRole::kW), seed + 1),
             testing::random_tensor(p.dtype, shape_of(p, TensorRole::kY), seed + 2)};
  o.get(p.output_role()).fill(std::numeric_limits<double>::quiet_NaN());
  return o;
}

void set_iota(TestTensor& t) {
  for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, static_cast<double>(i + 1));
}

std::vector<double> run(const ConvProblem& p, Operands& o) {
  run_reference(p, o.pointers());
  return o.get(p.output_role()).to_doubles();
}

// x = 1..9 as 1x3x3x1, f = 1..4 as 2x2x1x1, VALID, stride 1.
Geometry three_by_three() {
  Geometry g;
  g.ih = g.iw = 3;
  g.kh = g.kw = 2;
  return g;
}

TEST(Reference, ForwardByHand) {
  const ConvProblem p = make_problem(three_by_three(), ConvDirection::kForward);
  Operands o = random_operands(p, 1);
  set_iota(o.x);
  set_iota(o.w);
  // y[0,0] = 1*1 + 2*2 + 4*3 + 5*4, and the window slides by one.
  EXPECT_EQ(run(p, o), (std::vector<double>{37, 47, 67, 77}));
}

TEST(Reference, BackpropDataByHand) {
  const ConvProblem p = make_problem(three_by_three(), ConvDirection::kBackpropData);
  Operands o = random_operands(p, 2);
  set_iota(o.w);
  o.y.fill(1.0);
  // Each input position sums the filter taps that reach it.
  EXPECT_EQ(run(p, o), (std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
}

TEST(Reference, BackpropFilterByHand) {
  const ConvProblem p = make_problem(three_by_three(), ConvDirection::kBackpropFilter);
  Operands o = random_operands(p, 3);
  set_iota(o.x);
  o.y.fill(1.0);
  // df[kh,kw] = sum of the 2x2 block of x at offset (kh, kw).
  EXPECT_EQ(run(p, o), (std::vector<double>{12, 16, 24, 28}));
}

TEST(Reference, TensorFlowBackpropInputCase) {
  // conv_ops_test.testConv2D2x2Depth1ValidBackpropInput: input_sizes [1,2,3,1], filter 1..4,
  // out_backprop [1,2] -> [1,4,4,3,10,8].
  Geometry g;
  g.ih = 2;
  g.iw = 3;
  g.kh = g.kw = 2;
  const ConvProblem p = make_problem(g, ConvDirection::kBackpropData, DType::kFloat32);
  Operands o = random_operands(p, 4);
  set_iota(o.w);
  set_iota(o.y);
  EXPECT_EQ(run(p, o), (std::vector<double>{1, 4, 4, 3, 10, 8}));
}

TEST(Reference, StrideTwoWithSamePadding) {
  // 4x4 input 1..16, 3x3 ones, stride 2, SAME: out 2x2, pad bottom/right 1 (extra pad at the end).
  Geometry g;
  g.ih = g.iw = 4;
  g.kh = g.kw = 3;
  g.stride_h = g.stride_w = 2;
  g.pad_bottom = g.pad_right = 1;
  const ConvProblem p = make_problem(g, ConvDirection::kForward);
  ASSERT_EQ(p.oh, 2);
  Operands o = random_operands(p, 5);
  set_iota(o.x);
  o.w.fill(1.0);
  EXPECT_EQ(run(p, o), (std::vector<double>{54, 45, 72, 54}));
}

TEST(Reference, AsymmetricExplicitPadding) {
  // 1x3 input [1,2,3], 1x2 filter [10,1], pad left 2, right 0: windows start at -2, -1, 0, 1.
  Geometry g;
  g.iw = 3;
  g.kw = 2;
  g.pad_left = 2;
  const ConvProblem p = make_problem(g, ConvDirection::kForward);
  ASSERT_EQ(p.ow, 4);
  Operands o = random_operands(p, 6);
  set_iota(o.x);
  o.w.set(0, 10);
  o.w.set(1, 1);
  EXPECT_EQ(run(p, o), (std::vector<double>{0, 1, 12, 23}));
}

TEST(Reference, Dilation) {
  // A 2x2 filter with dilation 2 on a 3x3 input reads the four corners.
  Geometry g = three_by_three();
  g.dilation_h = g.dilation_w = 2;
  const ConvProblem p = make_problem(g, ConvDirection::kForward);
  ASSERT_EQ(p.oh, 1);
  Operands o = random_operands(p, 7);
  set_iota(o.x);
  set_iota(o.w);
  EXPECT_EQ(run(p, o), (std::vector<double>{1 * 1 + 3 * 2 + 7 * 3 + 9 * 4}));
}

TEST(Reference, GroupedChannels) {
  // ic 4 in 2 groups of 2, one output channel per group, 1x1 filter.
  Geometry g;
  g.ic = 4;
  g.filter_in = 2;
  g.oc = 2;
  const ConvProblem p = make_problem(g, ConvDirection::kForward);
  Operands o = random_operands(p, 8);
  set_iota(o.x);  // x = [1,2,3,4]
  set_iota(o.w);  // w[i][o] = [[1,2],[3,4]]
  // y0 = x0*w[0][0] + x1*w[1][0]; y1 = x2*w[0][1] + x3*w[1][1].
  EXPECT_EQ(run(p, o), (std::vector<double>{1 * 1 + 2 * 3, 3 * 2 + 4 * 4}));
}

TEST(Reference, TensorFlowDepthwiseCase) {
  // conv_ops_test.DepthwiseConv2DTest.testConv2D2x2Filter: input [1,2,3,2] 1..12, filter
  // [2,2,2,2] 1..16 (C=2, M=2), VALID.
  Geometry g;
  g.ih = 2;
  g.iw = 3;
  g.ic = 2;
  g.kh = g.kw = 2;
  g.filter_in = 1;
  g.oc = 4;
  g.depthwise = true;
  const ConvProblem p = make_problem(g, ConvDirection::kForward, DType::kFloat32);
  Operands o = random_operands(p, 9);
  set_iota(o.x);
  set_iota(o.w);
  EXPECT_EQ(run(p, o), (std::vector<double>{196, 216, 272, 296, 252, 280, 344, 376}));
}

TEST(Reference, EmptyProblemsZeroTheOutput) {
  for (ConvDirection d :
       {ConvDirection::kForward, ConvDirection::kBackpropData, ConvDirection::kBackpropFilter}) {
    Geometry g = three_by_three();
    g.n = 0;  // no batch: every output is zeros (the filter gradient has elements)
    ConvProblem p = make_problem(g, d);
    Operands o = random_operands(p, 10);
    for (double v : run(p, o)) EXPECT_EQ(v, 0.0) << direction_name(d);

    g = three_by_three();
    g.oc = 0;  // no output channels: the input gradient is all zeros
    p = make_problem(g, d);
    o = random_operands(p, 11);
    for (double v : run(p, o)) EXPECT_EQ(v, 0.0) << direction_name(d);
  }
}

TEST(Reference, HalfTypesRoundTheExactSumOnce) {
  // Values on a 2^-7 grid: the double sum is exact, so the result is exactly its rounding.
  for (DType dt : {DType::kHalf, DType::kBFloat16}) {
    Geometry g = three_by_three();
    g.ic = 5;
    g.filter_in = 5;
    g.oc = 3;
    const ConvProblem p = make_problem(g, ConvDirection::kForward, dt);
    Operands o = random_operands(p, 12);
    const std::vector<double> got = run(p, o);
    for (std::int64_t oh = 0; oh < p.oh; ++oh) {
      for (std::int64_t ow = 0; ow < p.ow; ++ow) {
        for (std::int64_t oc = 0; oc < p.oc; ++oc) {
          double sum = 0;
          for (std::int64_t kh = 0; kh < 2; ++kh)
            for (std::int64_t kw = 0; kw < 2; ++kw)
              for (std::int64_t i = 0; i < 5; ++i)
                sum += o.x.get(((oh + kh) * 3 + ow + kw) * 5 + i) *
                       o.w.get(((kh * 2 + kw) * 5 + i) * 3 + oc);
          std::uint16_t want = 0;
          store_from_double(dt, &want, 0, sum);
          EXPECT_EQ(got[static_cast<std::size_t>((oh * p.ow + ow) * 3 + oc)],
                    load_as_double(dt, &want, 0));
        }
      }
    }
  }
}

/// Tiny geometries covering strides, dilations, asymmetric pads, groups and depthwise.
std::vector<Geometry> tiny_geometries() {
  std::vector<Geometry> out;
  Geometry a;  // plain 3x3 on 5x4, two channels to three
  a.n = 2;
  a.ih = 5;
  a.iw = 4;
  a.ic = 2;
  a.filter_in = 2;
  a.oc = 3;
  a.kh = 3;
  a.kw = 3;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
  out.push_back(a);
  Geometry b;  // stride 2 x 3, asymmetric pads
  b.ih = 7;
  b.iw = 8;
  b.ic = 3;
  b.filter_in = 3;
  b.oc = 2;
  b.kh = 2;
  b.kw = 3;
  b.stride_h = 2;
  b.stride_w = 3;
  b.pad_top = 0;
  b.pad_bottom = 2;
  b.pad_left = 1;
  b.pad_right = 0;
  out.push_back(b);
  Geometry c;  // dilation 2 x 3 with stride 2
  c.n = 2;
  c.ih = 9;
  c.iw = 7;
  c.ic = 1;
  c.filter_in = 1;
  c.oc = 2;
  c.kh = 2;
  c.kw = 2;
  c.dilation_h = 2;
  c.dilation_w = 3;
  c.stride_h = 2;
  c.pad_left = 2;
  out.push_back(c);
  Geometry d;  // groups: 6 channels in 3 groups of 2, 2 outputs per group
  d.ih = 5;
  d.iw = 5;
  d.ic = 6;
  d.filter_in = 2;
  d.oc = 6;
  d.kh = 3;
  d.kw = 2;
  d.stride_w = 2;
  d.pad_top = 1;
  d.pad_bottom = 1;
  out.push_back(d);
  Geometry e;  // depthwise, multiplier 3
  e.ih = 6;
  e.iw = 5;
  e.ic = 2;
  e.filter_in = 1;
  e.oc = 6;
  e.kh = 3;
  e.kw = 3;
  e.depthwise = true;
  e.stride_h = e.stride_w = 2;
  e.pad_top = e.pad_left = 1;
  e.pad_bottom = e.pad_right = 1;
  out.push_back(e);
  return out;
}

/// <fwd(x, w), dy> == <x, bwd_data(w, dy)> == <w, bwd_filter(x, dy)> for the reference itself.
TEST(Reference, DirectionsAreAdjoint) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    std::uint64_t seed = 100;
    for (const Geometry& g : tiny_geometries()) {
      const ConvProblem fwd = make_problem(g, ConvDirection::kForward, DType::kFloat64, format);
      const ConvProblem bwd_data =
          make_problem(g, ConvDirection::kBackpropData, DType::kFloat64, format);
      const ConvProblem bwd_filter =
          make_problem(g, ConvDirection::kBackpropFilter, DType::kFloat64, format);
      Operands o = random_operands(fwd, seed += 10);
      TestTensor dy =
          testing::random_tensor(DType::kFloat64, shape_of(fwd, TensorRole::kY), seed + 5);
      run_reference(fwd, o.pointers());
      const double lhs = testing::dot(o.y.view(), dy.view());

      TestTensor dx(DType::kFloat64, shape_of(fwd, TensorRole::kX));
      TestTensor dw(DType::kFloat64, shape_of(fwd, TensorRole::kW));
      run_reference(bwd_data, {dx.data(), o.w.data(), dy.data()});
      run_reference(bwd_filter, {o.x.data(), dw.data(), dy.data()});
      const double via_data = testing::dot(o.x.view(), dx.view());
      const double via_filter = testing::dot(o.w.view(), dw.view());
      EXPECT_NEAR(lhs, via_data, 1e-12 * (1 + std::fabs(lhs)));
      EXPECT_NEAR(lhs, via_filter, 1e-12 * (1 + std::fabs(lhs)));
      EXPECT_GT(std::fabs(lhs), 1e-6);  // the identity is not vacuous
    }
  }
}

/// Elementwise: dx[j] = <fwd(e_j, w), dy> probes the scatter with the gather, one basis vector at
/// a time; likewise dw[j] = <fwd(x, e_j), dy>.
TEST(Reference, BackpropMatchesForwardOnBasisVectors) {
  for (const Geometry& g : tiny_geometries()) {
    const ConvProblem fwd =
        make_problem(g, ConvDirection::kForward, DType::kFloat64, DataFormat::kNCHW);
    const ConvProblem bwd_data =
        make_problem(g, ConvDirection::kBackpropData, DType::kFloat64, DataFormat::kNCHW);
    const ConvProblem bwd_filter =
        make_problem(g, ConvDirection::kBackpropFilter, DType::kFloat64, DataFormat::kNCHW);
    Operands o = random_operands(fwd, 300);
    TestTensor dy = testing::random_tensor(DType::kFloat64, shape_of(fwd, TensorRole::kY), 301);
    TestTensor dx(DType::kFloat64, shape_of(fwd, TensorRole::kX));
    TestTensor dw(DType::kFloat64, shape_of(fwd, TensorRole::kW));
    run_reference(bwd_data, {dx.data(), o.w.data(), dy.data()});
    run_reference(bwd_filter, {o.x.data(), dw.data(), dy.data()});

    TestTensor basis_x(DType::kFloat64, shape_of(fwd, TensorRole::kX));
    for (std::int64_t j = 0; j < basis_x.elements(); ++j) {
      basis_x.set(j, 1.0);
      run_reference(fwd, {basis_x.data(), o.w.data(), o.y.data()});
      EXPECT_NEAR(dx.get(j), testing::dot(o.y.view(), dy.view()), 1e-12) << "x element " << j;
      basis_x.set(j, 0.0);
    }
    TestTensor basis_w(DType::kFloat64, shape_of(fwd, TensorRole::kW));
    for (std::int64_t j = 0; j < basis_w.elements(); ++j) {
      basis_w.set(j, 1.0);
      run_reference(fwd, {o.x.data(), basis_w.data(), o.y.data()});
      EXPECT_NEAR(dw.get(j), testing::dot(o.y.view(), dy.view()), 1e-12) << "w element " << j;
      basis_w.set(j, 0.0);
    }
  }
}

/// NCHW is NHWC on permuted indices: run both on the same logical data and compare.
TEST(Reference, LayoutsAgree) {
  for (DType dt : {DType::kHalf, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (const Geometry& g : tiny_geometries()) {
      for (ConvDirection d : {ConvDirection::kForward, ConvDirection::kBackpropData,
                              ConvDirection::kBackpropFilter}) {
        const ConvProblem nhwc = make_problem(g, d, dt, DataFormat::kNHWC);
        const ConvProblem nchw = make_problem(g, d, dt, DataFormat::kNCHW);
        Operands a = random_operands(nhwc, 400);
        Operands b = random_operands(nchw, 400);
        // Copy NHWC inputs into NCHW order by logical index.
        for (TensorRole role : {TensorRole::kX, TensorRole::kW, TensorRole::kY}) {
          if (role == nhwc.output_role()) continue;
          if (role == TensorRole::kW) {  // HWIO whatever the data format
            b.w = a.w;
            continue;
          }
          const auto s = nhwc.shape(role);
          const auto sa = nhwc.strides(role);
          const auto sb = nchw.strides(role);
          for (std::int64_t i0 = 0; i0 < s[0]; ++i0)
            for (std::int64_t i1 = 0; i1 < s[1]; ++i1)
              for (std::int64_t i2 = 0; i2 < s[2]; ++i2)
                for (std::int64_t i3 = 0; i3 < s[3]; ++i3)
                  b.get(role).set(
                      i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3],
                      a.get(role).get(i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3]));
        }
        run_reference(nhwc, a.pointers());
        run_reference(nchw, b.pointers());
        const TensorRole out = nhwc.output_role();
        if (out == TensorRole::kW) {
          EXPECT_EQ(a.w.to_doubles(), b.w.to_doubles()) << dtype_name(dt);
          continue;
        }
        const auto s = nhwc.shape(out);  // logical {n,h,w,c} extents in NHWC order
        const auto sa = nhwc.strides(out);
        const auto sb = nchw.strides(out);
        for (std::int64_t i0 = 0; i0 < s[0]; ++i0)
          for (std::int64_t i1 = 0; i1 < s[1]; ++i1)
            for (std::int64_t i2 = 0; i2 < s[2]; ++i2)
              for (std::int64_t i3 = 0; i3 < s[3]; ++i3)
                ASSERT_EQ(a.get(out).get(i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3]),
                          b.get(out).get(i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3]))
                    << dtype_name(dt) << " " << direction_name(d);
      }
    }
  }
}

}  // namespace
}  // namespace convjit
