// The sweep cases every backend is checked against the naive reference with: every
// (op, dtype, layout, padding) cell, twice, with the remaining attributes picked greedily (from a
// fixed seed) to cover every pair of attribute values; then the empty-tensor cases for every op.
// The list is deterministic; sweep_test.cpp checks its coverage claims.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "convjit/types.hpp"
#include "support/test_conv_cases.hpp"

namespace convjit::testing {

inline constexpr OpKind kSweepOps[] = {
    OpKind::kConv2D,
    OpKind::kConv2DBackpropInput,
    OpKind::kConv2DBackpropInputV2,
    OpKind::kConv2DBackpropFilter,
    OpKind::kDepthwiseConv2dNative,
    OpKind::kDepthwiseConv2dNativeBackpropInput,
    OpKind::kDepthwiseConv2dNativeBackpropFilter,
};
inline constexpr DType kSweepDTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat32,
                                         DType::kFloat64};
inline constexpr DataFormat kSweepFormats[] = {DataFormat::kNHWC, DataFormat::kNCHW};
inline constexpr Padding kSweepPaddings[] = {Padding::kSame, Padding::kValid, Padding::kExplicit};

/// The secondary attributes and their levels (values are indices into these lists).
enum SweepAttr : int {
  kStrideH,
  kStrideW,
  kDilationH,
  kDilationW,
  kKernelH,
  kKernelW,
  kBatch,
  kHeight,
  kWidth,
  kGroups,       // conv: groups 1..3; depthwise: multiplier 1..3
  kGroupInput,   // conv: filter_in 1..3; depthwise: channels {1,2,5}
  kGroupOutput,  // conv: outputs per group 1..3; depthwise: unused level
  kPadPattern,   // EXPLICIT: which asymmetric (top, bottom, left, right)
  kSizesForm,    // Conv2DBackpropInput: input_sizes as 4 values or 2 spatial ones
  kNumAttrs,
};
inline constexpr std::array<int, kNumAttrs> kSweepLevels = {3, 3, 3, 3, 3, 3, 2,
                                                            6, 6, 3, 3, 3, 4, 2};

/// A case before materialisation: the primary cell and a level per secondary attribute.
struct CaseCode {
  int op = 0, dtype = 0, format = 0, padding = 0;
  std::array<int, kNumAttrs> level{};
  /// All attributes in one list: 4 primary then the secondary ones.
  std::array<int, 4 + kNumAttrs> all() const {
    std::array<int, 4 + kNumAttrs> a{op, dtype, format, padding};
    for (int i = 0; i < kNumAttrs; ++i) a[4 + i] = level[i];
    return a;
  }
};

struct SweepCase {
  OpKind op;
  ConvCase geometry;
  bool empty = false;
};

/// Cases per (op, dtype, layout, padding) cell: 168 cells, so 672 cases before the empty ones.
inline constexpr int kCasesPerCell = 4;

SweepCase materialise(const CaseCode& code);
/// Greedy pairwise (AETG-style) choice of the secondary attributes for every primary cell.
std::vector<CaseCode> covering_codes(int cases_per_cell);
/// Every op with an empty operand.
std::vector<SweepCase> empty_cases();
/// covering_codes(kCasesPerCell) materialised, then empty_cases().
std::vector<SweepCase> sweep_cases();

}  // namespace convjit::testing
