#include "support/sweep_cases.hpp"

#include <random>
#include <set>

namespace convjit::testing {
namespace {

constexpr std::int64_t kHeights[] = {1, 3, 4, 5, 7, 9};
constexpr std::int64_t kWidths[] = {1, 2, 5, 6, 8, 9};
constexpr std::int64_t kDepthwiseChannels[] = {1, 2, 5};
constexpr std::array<std::array<std::int64_t, 4>, 4> kPadPatterns = {
    {{0, 2, 1, 0}, {3, 1, 0, 2}, {1, 0, 2, 3}, {2, 3, 3, 1}}};

}  // namespace

SweepCase materialise(const CaseCode& code) {
  SweepCase s;
  s.op = kSweepOps[code.op];
  ConvCase& c = s.geometry;
  const auto& l = code.level;
  c.dtype = kSweepDTypes[code.dtype];
  c.format = kSweepFormats[code.format];
  c.padding = kSweepPaddings[code.padding];
  c.depthwise = is_depthwise(s.op);
  c.stride_h = 1 + l[kStrideH];
  // Depthwise ops require equal strides in H and W.
  c.stride_w = c.depthwise ? c.stride_h : 1 + l[kStrideW];
  c.dilation_h = 1 + l[kDilationH];
  c.dilation_w = 1 + l[kDilationW];
  c.kh = 1 + l[kKernelH];
  c.kw = 1 + l[kKernelW];
  c.n = 1 + l[kBatch];
  c.h = kHeights[l[kHeight]];
  c.w = kWidths[l[kWidth]];
  if (c.depthwise) {
    c.c = kDepthwiseChannels[l[kGroupInput]];
    c.filter_in = 1;
    c.filter_out = 1 + l[kGroups];  // depth multiplier
  } else {
    const std::int64_t groups = 1 + l[kGroups];
    c.filter_in = 1 + l[kGroupInput];
    c.c = c.filter_in * groups;
    c.filter_out = (1 + l[kGroupOutput]) * groups;
  }
  if (c.padding == Padding::kExplicit) {
    const auto& pads = kPadPatterns[static_cast<std::size_t>(l[kPadPattern])];
    c.pad_top = pads[0];
    c.pad_bottom = pads[1];
    c.pad_left = pads[2];
    c.pad_right = pads[3];
  }
  // Two-value input_sizes take the input depth from filter dim 2, so that form is ungrouped.
  c.spatial_input_sizes = s.op == OpKind::kConv2DBackpropInput && l[kSizesForm] == 1;
  if (c.spatial_input_sizes) {
    c.filter_out /= c.groups();
    c.c = c.filter_in;
  }
  // TensorFlow rejects a window larger than the padded input; grow the input to fit instead.
  if (c.out_h() < 0) c.h = (c.kh - 1) * c.dilation_h + 1 - c.pad_top - c.pad_bottom;
  if (c.out_w() < 0) c.w = (c.kw - 1) * c.dilation_w + 1 - c.pad_left - c.pad_right;
  return s;
}

/// Greedy pairwise (AETG-style) choice of the secondary attributes for every primary cell.
std::vector<CaseCode> covering_codes(int cases_per_cell) {
  constexpr int kAll = 4 + kNumAttrs;
  const std::array<int, 4> primary_levels = {
      static_cast<int>(std::size(kSweepOps)), static_cast<int>(std::size(kSweepDTypes)),
      static_cast<int>(std::size(kSweepFormats)), static_cast<int>(std::size(kSweepPaddings))};
  std::set<std::array<int, 4>> covered;  // {attr a, value a, attr b, value b}
  auto new_pairs = [&](const CaseCode& code) {
    const auto a = code.all();
    int count = 0;
    for (int i = 0; i < kAll; ++i)
      for (int j = i + 1; j < kAll; ++j) count += covered.count({i, a[i], j, a[j]}) == 0 ? 1 : 0;
    return count;
  };
  std::mt19937_64 rng(0x5eed'c0de);
  std::vector<CaseCode> codes;
  for (int op = 0; op < primary_levels[0]; ++op)
    for (int dt = 0; dt < primary_levels[1]; ++dt)
      for (int fm = 0; fm < primary_levels[2]; ++fm)
        for (int pd = 0; pd < primary_levels[3]; ++pd)
          for (int rep = 0; rep < cases_per_cell; ++rep) {
            CaseCode best;
            int best_score = -1;
            for (int candidate = 0; candidate < 24; ++candidate) {
              CaseCode code{op, dt, fm, pd, {}};
              for (int i = 0; i < kNumAttrs; ++i) {
                code.level[i] =
                    static_cast<int>(rng() % static_cast<std::uint64_t>(kSweepLevels[i]));
              }
              const int score = new_pairs(code);
              if (score > best_score) {
                best = code;
                best_score = score;
              }
            }
            const auto a = best.all();
            for (int i = 0; i < kAll; ++i)
              for (int j = i + 1; j < kAll; ++j) covered.insert({i, a[i], j, a[j]});
            codes.push_back(best);
          }
  return codes;
}

/// Every op with an empty operand: no batch, no output channels (forward ops: no input width),
/// an output window truncated to zero (VALID, in 1, k_eff 5, stride 3) and an empty input height
/// under SAME.
std::vector<SweepCase> empty_cases() {
  std::vector<SweepCase> out;
  int index = 0;
  for (OpKind op : kSweepOps) {
    for (int kind = 0; kind < 4; ++kind, ++index) {
      SweepCase s;
      s.op = op;
      s.empty = true;
      ConvCase& c = s.geometry;
      c.dtype = kSweepDTypes[index % 4];
      c.format = kSweepFormats[(index / 4) % 2];
      c.depthwise = is_depthwise(op);
      c.n = 2;
      c.h = 5;
      c.w = 4;
      c.c = 3;
      c.kh = 2;
      c.kw = 3;
      c.filter_in = c.depthwise ? 1 : 3;
      c.filter_out = 2;
      c.padding = Padding::kSame;
      switch (kind) {
        case 0:
          c.n = 0;
          break;
        case 1:
          // TensorFlow's forward ops refuse an empty filter; they get an empty width instead.
          if (op == OpKind::kConv2D || op == OpKind::kDepthwiseConv2dNative) {
            c.w = 0;
          } else {
            c.filter_out = 0;
          }
          break;
        case 2:
          c.padding = Padding::kValid;
          c.h = 1;
          c.kh = 3;
          c.dilation_h = 2;
          c.stride_h = c.stride_w = 3;
          break;
        default:
          c.h = 0;
          break;
      }
      out.push_back(s);
    }
  }
  return out;
}

std::vector<SweepCase> sweep_cases() {
  std::vector<SweepCase> cases;
  for (const CaseCode& code : covering_codes(kCasesPerCell)) cases.push_back(materialise(code));
  for (const SweepCase& s : empty_cases()) cases.push_back(s);
  return cases;
}

}  // namespace convjit::testing
