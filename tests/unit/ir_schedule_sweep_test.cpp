// Semantic preservation of lowering and every schedule pass: the nest after lowering and after
// each pass is interpreted on random data and compared with the naive reference, over a sweep
// of directions, dtypes, layouts, padding modes, strides, dilations, groups, depth multipliers
// and empty tensors, for the scalar target (serial and threaded) and the host's vector target.
// Structural promises are checked on the way: no divisor survives the residue split and no
// interior tile keeps a guard.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpreter.hpp"
#include "ir/pipeline.hpp"
#include "ir/printer.hpp"
#include "reference/naive.hpp"
#include "support/test_tensors.hpp"

namespace convjit::ir {
namespace {

using convjit::testing::TestTensor;

struct Geometry {
  std::int64_t n, h, w, c, kh, kw;
  std::int64_t filter_in;  // ignored for depthwise (1)
  std::int64_t out;        // oc, or the depth multiplier for depthwise
  std::int64_t sh, sw, dh, dw;
  Padding padding;
  std::int64_t pt = 0, pb = 0, pl = 0, pr = 0;
  bool depthwise = false;
};

void out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, Padding pad,
              std::int64_t* before, std::int64_t* after, std::int64_t* out) {
  const std::int64_t k_eff = (k - 1) * d + 1;
  if (pad == Padding::kValid) {
    *before = *after = 0;
  }
  if (pad == Padding::kSame) {
    *out = (in + s - 1) / s;
    const std::int64_t total = std::max<std::int64_t>(0, (*out - 1) * s + k_eff - in);
    *before = total / 2;
    *after = total - *before;
    return;
  }
  *out = (in + *before + *after - k_eff + s) / s;
}

ConvProblem make_problem(const Geometry& g, ConvDirection dir, DType dtype, DataFormat format) {
  ConvProblem p;
  p.direction = dir;
  p.dtype = dtype;
  p.format = format;
  p.n = g.n;
  p.ih = g.h;
  p.iw = g.w;
  p.ic = g.c;
  p.kh = g.kh;
  p.kw = g.kw;
  p.depthwise = g.depthwise;
  p.filter_in = g.depthwise ? 1 : g.filter_in;
  p.groups = p.filter_in > 0 ? g.c / p.filter_in : 0;
  p.oc = g.depthwise ? g.c * g.out : g.out;
  p.stride_h = g.sh;
  p.stride_w = g.sw;
  p.dilation_h = g.dh;
  p.dilation_w = g.dw;
  p.pad_top = g.pt;
  p.pad_bottom = g.pb;
  p.pad_left = g.pl;
  p.pad_right = g.pr;
  out_size(g.h, g.kh, g.sh, g.dh, g.padding, &p.pad_top, &p.pad_bottom, &p.oh);
  out_size(g.w, g.kw, g.sw, g.dw, g.padding, &p.pad_left, &p.pad_right, &p.ow);
  p.op = dir == ConvDirection::kForward ? (g.depthwise ? OpKind::kDepthwiseConv2dNative : OpKind::kConv2D)
         : dir == ConvDirection::kBackpropData
             ? (g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropInput : OpKind::kConv2DBackpropInput)
             : (g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropFilter : OpKind::kConv2DBackpropFilter);
  return p;
}

std::vector<std::int64_t> shape_of(const ConvProblem& p, TensorRole role) {
  const auto s = p.shape(role);
  return {s.begin(), s.end()};
}

// Splits [0, n) into up to 3 chunks on their own threads, so parallel loops really overlap.
void threaded_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  const std::int64_t chunks = std::min<std::int64_t>(n, 3);
  std::vector<std::thread> threads;
  for (std::int64_t c = 0; c < chunks; ++c) {
    threads.emplace_back([&, c] { body(n * c / chunks, n * (c + 1) / chunks); });
  }
  for (auto& t : threads) t.join();
}

bool has_divisor(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      if (has_divisor(l->body)) return true;
    } else if (const auto* t = std::get_if<Tile>(&s.node)) {
      for (const Access* a : {&t->a, &t->b, &t->c}) {
        for (const IndexExpr& e : a->index) {
          if (e.divisor != 1) return true;
        }
      }
      for (const Guard& g : t->guards) {
        if (g.expr.divisor != 1) return true;
      }
    }
  }
  return false;
}

bool is_border_label(const std::string& label) {
  for (const char* side : {"top", "bottom", "left", "right", "low", "high"}) {
    if (label.find(side) != std::string::npos) return true;
  }
  return false;
}

// Tiles with no border loop around them must have no guards. Returns the number checked.
int check_interior(const std::vector<Stmt>& body, bool in_border, std::string* failure) {
  int checked = 0;
  for (const Stmt& s : body) {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      checked += check_interior(l->body, in_border || is_border_label(l->label), failure);
    } else if (const auto* t = std::get_if<Tile>(&s.node)) {
      if (in_border) continue;
      ++checked;
      if (!t->guards.empty()) *failure = "interior tile with guards";
    }
  }
  return checked;
}

struct Operands {
  TestTensor x, w, y;
  OperandPointers ptrs() { return {x.data(), w.data(), y.data()}; }
};

Operands make_operands(const ConvProblem& p, std::uint64_t seed) {
  Operands o;
  o.x = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kX), seed);
  o.w = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kW), seed + 1);
  o.y = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kY), seed + 2);
  return o;
}

TestTensor& output_of(Operands& o, const ConvProblem& p) {
  const TensorRole r = p.output_role();
  return r == TensorRole::kX ? o.x : r == TensorRole::kW ? o.w : o.y;
}

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> kCases = {
      {1, 5, 5, 3, 3, 3, 3, 4, 1, 1, 1, 1, Padding::kSame},
      {2, 7, 6, 4, 3, 2, 4, 5, 2, 3, 1, 1, Padding::kSame},
      {1, 9, 8, 6, 3, 3, 2, 6, 2, 2, 2, 2, Padding::kValid},  // groups = 3
      {1, 6, 7, 3, 2, 3, 3, 2, 3, 2, 1, 3, Padding::kExplicit, 1, 2, 0, 3},
      {1, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, Padding::kSame, 0, 0, 0, 0, true},
      {2, 7, 5, 3, 3, 2, 1, 2, 2, 2, 2, 1, Padding::kSame, 0, 0, 0, 0, true},
      {1, 5, 4, 2, 1, 1, 2, 3, 2, 2, 1, 1, Padding::kValid},   // 1x1, residues with no tap
      {1, 8, 8, 2, 3, 3, 2, 2, 1, 1, 3, 3, Padding::kExplicit, 6, 5, 6, 5},  // wide borders
      {1, 1, 5, 2, 5, 2, 2, 2, 3, 1, 1, 1, Padding::kValid},   // out height 0: empty
      {0, 4, 4, 2, 3, 3, 2, 2, 1, 1, 1, 1, Padding::kSame},    // empty batch
      {1, 12, 11, 17, 3, 3, 17, 19, 1, 1, 1, 1, Padding::kSame},  // channel tails, threads
      {1, 4, 5, 40, 3, 3, 40, 6, 1, 1, 1, 1, Padding::kSame},     // channel blocks (vector targets)
  };
  return kCases;
}

struct SweepParam {
  ConvDirection dir;
  DType dtype;
};

class IrScheduleSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(IrScheduleSweep, EveryStageMatchesTheReference) {
  const auto [dir, dtype] = GetParam();
  const Target host = Target::host(Isa::kAvx512, 4);
  const std::vector<std::pair<Target, bool>> targets = {
      {Target::generic(1), false}, {Target::generic(4), true}, {host, true}};
  std::uint64_t seed = 11;
  for (const DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    for (std::size_t gi = 0; gi < geometries().size(); ++gi) {
      const ConvProblem p = make_problem(geometries()[gi], dir, dtype, format);
      SCOPED_TRACE(fmt::format("geometry {} {} {} {}", gi, direction_name(p.direction),
                               dtype_name(p.dtype), data_format_name(p.format)));
      Operands ref = make_operands(p, seed);
      run_reference(p, ref.ptrs());
      const TestTensor& want = output_of(ref, p);
      const auto tol = convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p));
      for (const auto& [target, threaded] : targets) {
        SCOPED_TRACE(target.name() + (threaded ? " threaded" : ""));
        lower_and_schedule(p, target, [&](std::string_view pass, const LoopNest& nest) {
          SCOPED_TRACE(std::string(pass));
          Operands got = make_operands(p, seed);
          output_of(got, p).fill(std::numeric_limits<double>::quiet_NaN());
          ASSERT_TRUE(interpret(nest, got.ptrs(), threaded ? ParallelFor(threaded_for) : ParallelFor(serial_for))
                          .is_ok());
          ASSERT_TRUE(convjit::testing::all_close(output_of(got, p).view(), want.view(), tol))
              << print(nest);
          if (pass == "stride_residue_split") EXPECT_FALSE(has_divisor(nest.body)) << print(nest);
          if (pass == "border_peel" || pass == "register_tile" || pass == "parallelize") {
            std::string failure;
            check_interior(nest.body, false, &failure);
            EXPECT_EQ(failure, "") << print(nest);
          }
        });
      }
      ++seed;
    }
  }
}

std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> out;
  for (auto dir : {ConvDirection::kForward, ConvDirection::kBackpropData, ConvDirection::kBackpropFilter}) {
    for (auto dt : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kHalf}) {
      out.push_back({dir, dt});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, IrScheduleSweep, ::testing::ValuesIn(sweep_params()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return fmt::format("{}_{}", direction_name(info.param.dir),
                                              dtype_name(info.param.dtype));
                         });

}  // namespace
}  // namespace convjit::ir
