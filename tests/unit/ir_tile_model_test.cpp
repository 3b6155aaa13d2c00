// The register-tile model's decisions on a few descriptors, for AVX2 and AVX-512 targets built
// by hand (so they hold on any host): chosen tiles fit the register file and reuse their loads,
// a 3-channel data gradient takes W positions as its vector instead of a mostly masked channel
// vector, NCHW tiles share each dy vector across input channels, and the kernel is named after
// a tile it really has.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/tile_model.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "support/cpu_test_targets.hpp"

namespace convjit::cpu {
namespace {

using namespace ir;
using testing::generic_target;
using testing::host_target;
using testing::lower_and_schedule;
using testing::run;
using testing::TestTarget;

TestTarget avx2() {
  TestTarget t;
  t.isa = Isa::kAvx2;
  t.vector_bytes = 32;
  t.vector_registers = 16;
  t.has_fma = true;
  t.has_f16c = true;
  return t;
}

TestTarget avx512() {
  TestTarget t = avx2();
  t.isa = Isa::kAvx512;
  t.vector_bytes = 64;
  t.vector_registers = 32;
  return t;
}

// A Zen 4 core: one zmm FMA a cycle, 32 KiB L1, 1 MiB L2 filling L1 at 32 bytes a cycle.
TestTarget zen4_core() {
  TestTarget t = avx512();
  t.fmas_per_cycle = 1;
  t.l1_bytes = 32 * 1024;
  t.l2_bytes = 1024 * 1024;
  t.l2_fill_bytes_per_cycle = 32;
  return t;
}

// Registers an outer-product tile needs: its accumulators plus the shared vectors and two
// temporaries, or plus every row's broadcast and one temporary for the streamed vectors.
std::int64_t registers_of(std::int64_t rows, std::int64_t vecs) {
  return rows * vecs + std::min(vecs + 2, rows + 1);
}

std::int64_t vectors_of(const TileModel& m, const TileShape& s) {
  return (s.cols + m.lanes() - 1) / m.lanes();
}

ConvProblem backprop_data(DataFormat format, std::int64_t n, std::int64_t hw, std::int64_t ic,
                          std::int64_t oc, std::int64_t k, std::int64_t stride) {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.format = format;
  p.n = n;
  p.ih = p.iw = hw;
  p.ic = p.filter_in = ic;
  p.oc = oc;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = stride;
  p.oh = p.ow = (hw + stride - 1) / stride;  // SAME
  const std::int64_t pad = std::max<std::int64_t>((p.oh - 1) * stride + k - hw, 0);
  p.pad_top = p.pad_left = pad / 2;
  p.pad_bottom = p.pad_right = pad - pad / 2;
  return p;
}

struct TileSeen {
  Tile tile;
  std::int64_t c_col_coef = 0;  // flat coefficient of c along the column
  std::int64_t b_row_coef = 0;  // flat coefficient of b along the row
};

std::vector<TileSeen> tiles_of(LoopNest& nest) {
  std::vector<TileSeen> out;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    TileSeen s{t};
    Affine c, b;
    EXPECT_TRUE(flatten_access(nest, t.c, &c));
    EXPECT_TRUE(flatten_access(nest, t.b, &b));
    s.c_col_coef = c.coef_of(t.col_var);
    s.b_row_coef = b.coef_of(t.row_var);
    out.push_back(s);
  });
  return out;
}

// The rows x cols the kernel's name gives.
std::pair<std::int64_t, std::int64_t> named_tile(const LoopNest& nest) {
  std::smatch m;
  const std::regex re("r([0-9]+)x([0-9]+)");
  EXPECT_TRUE(std::regex_search(nest.schedule_summary, m, re)) << nest.schedule_summary;
  if (m.empty()) return {0, 0};
  return {std::stoll(m[1].str()), std::stoll(m[2].str())};
}

TEST(IrTileModel, ChosenTilesFitTheRegistersAndReuseTheirLoads) {
  for (const TestTarget& target : {avx2(), avx512()}) {
    const TileModel m = TileModel::of(target, DType::kFloat32);
    // A wide data-gradient row: 56 positions x 128 channels, a 3x3x128 reduction.
    const TileShape s = m.choose(TileForm::kOuterProduct, 56, 128, 9 * 128);
    const std::int64_t vecs = vectors_of(m, s);
    EXPECT_LE(registers_of(s.rows, vecs), target.vector_registers) << target.name();
    EXPECT_TRUE(m.fits(TileForm::kOuterProduct, s.rows, vecs));
    // Each broadcast feeds several FMAs and each vector several rows: more FMAs than loads.
    EXPECT_GT(s.rows, 1) << target.name();
    EXPECT_GT(static_cast<double>(s.rows * vecs) / static_cast<double>(s.rows + vecs), 1.0);
    // A larger tile is never beyond the register file, whichever extents it is asked for.
    for (std::int64_t rows : {1, 3, 7, 100}) {
      for (std::int64_t cols : {1, 3, 8, 17, 1000}) {
        const TileShape t = m.choose(TileForm::kOuterProduct, rows, cols, 64);
        EXPECT_TRUE(m.fits(TileForm::kOuterProduct, t.rows, vectors_of(m, t))) << rows << "x" << cols;
        EXPECT_LE(t.rows, rows);
        EXPECT_LE(t.cols, cols);
      }
    }
  }
}

TEST(IrTileModel, ElementwiseTilesLoadEveryOperandAndStayInRegisters) {
  for (const TestTarget& target : {avx2(), avx512()}) {
    const TileModel m = TileModel::of(target, DType::kFloat32);
    const TileShape s = m.choose(TileForm::kElementwise, 32, 64, 25);
    EXPECT_TRUE(m.fits(TileForm::kElementwise, s.rows, vectors_of(m, s)));
    EXPECT_LE(s.rows * vectors_of(m, s) + vectors_of(m, s) + 2, target.vector_registers);
    EXPECT_GE(s.cols, m.lanes()) << "a full vector of channels";
  }
}

TEST(IrTileModel, ThreeChannelDataGradientVectorizesPositionsNotChannels) {
  // The ResNet stem's data gradient: 3 input channels, 7x7 taps, stride 2.
  for (const TestTarget& target : {avx2(), avx512()}) {
    const TileModel m = TileModel::of(target, DType::kFloat32);
    const ConvProblem p = backprop_data(DataFormat::kNHWC, 2, 224, 3, 64, 7, 2);
    LoopNest nest = lower_and_schedule(p, target);
    std::int64_t vectorized = 0;
    for (const TileSeen& s : tiles_of(nest)) {
      if (s.tile.cols <= 1) continue;
      ++vectorized;
      // The vector runs over W positions of a residue (c strided by stride x channels), never
      // over the 3 channels, which would leave most lanes masked.
      EXPECT_EQ(s.c_col_coef, p.stride_w * p.ic);
      EXPECT_LE(s.tile.rows, p.ic);
      EXPECT_EQ(s.b_row_coef, 0) << "the dy vector is shared by the channel rows";
    }
    EXPECT_GT(vectorized, 0);
    const auto [rows, cols] = named_tile(nest);
    EXPECT_EQ(rows, p.ic) << nest.schedule_summary;
    EXPECT_GE(cols, m.lanes()) << nest.schedule_summary;
  }
}

TEST(IrTileModel, WideChannelDataGradientKeepsChannelVectors) {
  for (const TestTarget& target : {avx2(), avx512()}) {
    const ConvProblem p = backprop_data(DataFormat::kNHWC, 2, 28, 128, 128, 3, 1);
    LoopNest nest = lower_and_schedule(p, target);
    EXPECT_EQ(nest.schedule_summary.find("wvec"), std::string::npos) << nest.schedule_summary;
    const auto [rows, cols] = named_tile(nest);
    EXPECT_GT(rows, 1);
    EXPECT_EQ(cols % (target.vector_bytes / 4), 0) << "whole channel vectors";
  }
}

TEST(IrTileModel, DeepDataGradientOnVectorWideRowsKeepsChannelVectors) {
  // UNet's 64x64 3x3 layer of 256 channels: 64 positions fill W vectors as evenly as 256
  // channels fill channel vectors, but the position tiles would broadcast from a line per tap
  // and output channel (147 KB, past L1) where the channel tiles load packed filter vectors.
  for (const TestTarget& target : {avx2(), avx512()}) {
    const ConvProblem p = backprop_data(DataFormat::kNHWC, 2, 64, 256, 256, 3, 1);
    LoopNest nest = lower_and_schedule(p, target);
    EXPECT_EQ(nest.schedule_summary.find("wvec"), std::string::npos) << nest.schedule_summary;
    EXPECT_EQ(named_tile(nest).second % (target.vector_bytes / 4), 0) << nest.schedule_summary;
  }
}

TEST(IrTileModel, PointwiseImagesTileTheirPixelsAsOneRow) {
  // ResNet-50's 7x7 1x1 layer on AVX2: a row of 7 pixels would take 2-row tiles and a 1-row
  // tail; as one row of 49 pixels per image the tiles take the rows the model wants.
  {
    const ConvProblem p = backprop_data(DataFormat::kNHWC, 8, 7, 2048, 512, 1, 1);
    LoopNest nest = lower_and_schedule(p, avx2());
    EXPECT_NE(nest.schedule_summary.find("px"), std::string::npos) << nest.schedule_summary;
    EXPECT_EQ(nest.problem.iw, 49);
    EXPECT_GE(named_tile(nest).first, 3) << nest.schedule_summary;
  }
  for (const TestTarget& target : {avx2(), avx512()}) {
    // Long rows lose little to their tails and keep them (channel blocks around each row keep
    // the row's dy in cache across the blocks).
    const ConvProblem wide = backprop_data(DataFormat::kNHWC, 8, 56, 96, 384, 1, 1);
    EXPECT_EQ(lower_and_schedule(wide, target).schedule_summary.find("px"), std::string::npos);
    // Not where a tap leaves the pixel's own position: a 3x3 filter, or a stride.
    for (const ConvProblem& q : {backprop_data(DataFormat::kNHWC, 8, 7, 64, 64, 3, 1),
                                 backprop_data(DataFormat::kNHWC, 8, 14, 64, 64, 1, 2)}) {
      EXPECT_EQ(lower_and_schedule(q, target).schedule_summary.find("px"), std::string::npos);
    }
  }
}

TEST(IrTileModel, NchwDataGradientSharesEachDyVectorAcrossChannels) {
  for (const TestTarget& target : {avx2(), avx512()}) {
    const ConvProblem p = backprop_data(DataFormat::kNCHW, 2, 28, 128, 128, 3, 1);
    LoopNest nest = lower_and_schedule(p, target);
    bool shared = false;
    for (const TileSeen& s : tiles_of(nest)) {
      if (s.tile.cols <= 1) continue;
      EXPECT_EQ(s.c_col_coef, 1) << "vectors along W";
      EXPECT_EQ(s.b_row_coef, 0);
      shared = shared || s.tile.rows > 1;
    }
    EXPECT_TRUE(shared) << "rows over input channels";
    EXPECT_GT(named_tile(nest).first, 1) << nest.schedule_summary;
  }
}

TEST(IrTileModel, KernelNameIsTheTileThatDoesMostOfTheWork) {
  for (const TestTarget& target : {avx2(), avx512()}) {
    for (const ConvProblem& p : {backprop_data(DataFormat::kNHWC, 1, 17, 48, 32, 3, 1),
                                 backprop_data(DataFormat::kNCHW, 1, 28, 16, 16, 3, 2),
                                 backprop_data(DataFormat::kNHWC, 1, 56, 3, 64, 7, 2)}) {
      LoopNest nest = lower_and_schedule(p, target);
      const auto named = named_tile(nest);
      std::map<std::pair<std::int64_t, std::int64_t>, int> shapes;
      for (const TileSeen& s : tiles_of(nest)) ++shapes[{s.tile.rows, s.tile.cols}];
      EXPECT_TRUE(shapes.count(named) > 0)
          << nest.schedule_summary << " names a tile the kernel does not have";
    }
  }
}


// With a column granule (whole 64-byte lines, which streamed stores need), the main tile and
// the column tail are both multiples of it where the extent allows, and the plain choice
// stands where it does not.
TEST(TileModel, ColumnGranuleKeepsTilesOnWholeLines) {
  const TileModel m = TileModel::of(avx2(), DType::kFloat32);
  // NCHW rows of 112 floats, one broadcast tap times a vector per column.
  const TileShape plain = m.choose(TileForm::kOuterProduct, 1, 112, 9);
  const TileShape lines = m.choose(TileForm::kOuterProduct, 1, 112, 9, 16);
  EXPECT_NE(plain.cols % 16, 0) << plain.cols;  // 40 + 40 + 32 without the granule
  EXPECT_EQ(lines.cols % 16, 0) << lines.cols;
  EXPECT_EQ(112 % lines.cols % 16, 0) << lines.cols;
  // 20 columns hold no whole line of 16 in a tail-free split: the plain choice.
  const TileShape narrow = m.choose(TileForm::kOuterProduct, 1, 20, 9, 16);
  const TileShape narrow_plain = m.choose(TileForm::kOuterProduct, 1, 20, 9);
  EXPECT_EQ(narrow.cols, narrow_plain.cols);
  EXPECT_EQ(narrow.rows, narrow_plain.rows);
}

// Filter-gradient chunks: a filter whose f32 partial sums stay in L2 keeps the one-row chunks
// that L1 asks for; one that outgrows L2 gets chunks long enough that reloading each tile's
// accumulators from L3 costs a small share of the chunk's FMAs (min_chunk_points).
TEST(IrTileModel, FilterGradientChunksGrowWhenPartialSumsOutgrowL2) {
  auto chunk_summary = [](std::int64_t hw, std::int64_t c) {
    ConvProblem p = backprop_data(DataFormat::kNHWC, 8, hw, c, c, 3, 1);
    p.direction = ConvDirection::kBackpropFilter;
    const LoopNest nest = lower_and_schedule(p, avx2());
    return nest.schedule_summary;
  };
  // 56x56x64: 147 KB of dW, in L2. The twelve accumulators reloaded from there per chunk (14
  // cycles and 768 bytes at 32 a cycle, twice) against 6 cycles of FMAs per point would want 64
  // points for a tenth, but one row's 56 keep them below a quarter: the chunk that fits L1.
  EXPECT_NE(chunk_summary(56, 64).find("blk=n,oh1"), std::string::npos) << chunk_summary(56, 64);
  // A 1x1 filter on 14x14x256 with AVX-512 (48 KB L1, 1 MB L2): 256 KB of dW, in L2. A 6x64
  // tile's 24 zmm accumulators cost 110 cycles to reload against 12 of FMAs per point; the L1
  // chunk of 2 rows (28 points) would spend about 40% of its time on them, so the chunk grows
  // to the tenth's 92 points: 7 rows.
  TestTarget zen = avx512();
  zen.l1_bytes = 48 * 1024;
  zen.l2_bytes = 1024 * 1024;
  ConvProblem one_by_one = backprop_data(DataFormat::kNHWC, 8, 14, 256, 256, 1, 1);
  one_by_one.direction = ConvDirection::kBackpropFilter;
  const std::string summary = lower_and_schedule(one_by_one, zen).schedule_summary;
  EXPECT_NE(summary.find("blk=n,oh7"), std::string::npos) << summary;
  // 28x28x128 and 14x14x256: 590 KB and 2.4 MB of dW, past half the L2. A 3x32 tile's twelve
  // ymm accumulators reloaded from L3 per chunk (50 cycles and 768 bytes at 16 a cycle, twice)
  // against 6 cycles of FMAs per point: 164 points would keep the reloads at a tenth. But a
  // column block's slice of the chunk (32 floats of dy and a line of x, 192 bytes a point) may
  // fill three quarters of the 32 KB L1, 128 points: 28-wide rows in chunks of 4, 14-wide rows
  // in two equal chunks of 7 (not 9 and 5).
  EXPECT_NE(chunk_summary(28, 128).find("blk=n,oh4"), std::string::npos) << chunk_summary(28, 128);
  EXPECT_NE(chunk_summary(14, 256).find("blk=n,oh7"), std::string::npos) << chunk_summary(14, 256);
}

// Where the tiles read x or dy in place at a pixel stride that crowds a few L1 sets, the chunk
// that fits L1's share keeps nothing in L1 and is not taken for its own sake. A Zen 4 core (one
// zmm FMA a cycle, 32 KiB L1, 1 MiB L2 filled at 32 bytes a cycle, where L2 feeds the f32
// tiles and no padded copies are made), ResNet-50's 28x28 1x1 layer of 512 -> 128 channels:
// x's pixels 2 KiB apart fall in 2 of L1's 64 sets a line, so the chunk takes the points the
// reloads ask for, not the one row that fits L1's share: grown past L1 where L2 feeds the
// tiles, the 92 that keep them at a twentieth of the FMA time (4 rows). With 480 -> 144
// channels (pixels 1920 and 576 bytes apart, spread over 32 and 64 sets) the one-row L1 chunk
// stays.
TEST(IrTileModel, CrowdedL1SetsSizeTheChunkForTheReloads) {
  const TestTarget zen4 = zen4_core();
  auto summary = [&](std::int64_t ic, std::int64_t oc) {
    ConvProblem p = backprop_data(DataFormat::kNHWC, 8, 28, ic, oc, 1, 1);
    p.direction = ConvDirection::kBackpropFilter;
    return lower_and_schedule(p, zen4).schedule_summary;
  };
  EXPECT_NE(summary(512, 128).find("blk=n,oh4"), std::string::npos) << summary(512, 128);
  EXPECT_NE(summary(480, 144).find("blk=n,oh1"), std::string::npos) << summary(480, 144);
}

// Where L2 feeds the f32 tiles, a chunk grows past L1 to the points the reloads ask for: on a
// Zen 4 core (one zmm FMA a cycle, r6x64's 320 bytes a point in 24 cycles, L2 filling L1 at
// 32 bytes a cycle) ResNet-50's 7x7 1x1 filter gradient of 2048 -> 512 channels (4 MB of dW,
// reloaded from L3 at a twentieth of the FMA time: 202 points) takes all of its 8 images (5
// do not divide them), not the 1 that three quarters of L1 holds. At two FMAs a cycle the
// same L2 no longer keeps up and the L1 cap stays.
TEST(IrTileModel, ChunksGrowPastL1WhereL2FeedsTheTiles) {
  const TestTarget zen4 = zen4_core();
  TestTarget two_fmas = zen4;
  two_fmas.fmas_per_cycle = 2;
  ConvProblem p = backprop_data(DataFormat::kNHWC, 8, 7, 2048, 512, 1, 1);
  p.direction = ConvDirection::kBackpropFilter;
  const std::string fed = lower_and_schedule(p, zen4).schedule_summary;
  const std::string capped = lower_and_schedule(p, two_fmas).schedule_summary;
  EXPECT_EQ(fed.find("blk="), std::string::npos) << fed;
  EXPECT_NE(capped.find("blk=n "), std::string::npos) << capped;
}

// Chunks of whole images (7x7 images, dW far beyond L2) stop where a column block's slice of
// them outgrows three quarters of L1: 4 images (196 points) would keep the reloads at a tenth,
// but at 192 bytes a point only 2 (98) fit the 32 KB L1 of the AVX2 target; 48 KB holds 3,
// which does not divide the 8 images (still 2), and 64 KB the 4 the reloads ask for. With one
// thread, 8 images, a 1x1 filter.
TEST(IrTileModel, ImageChunksStayWithinL1) {
  ConvProblem p = backprop_data(DataFormat::kNHWC, 8, 7, 1024, 512, 1, 1);
  p.direction = ConvDirection::kBackpropFilter;
  auto chunks_with_l1 = [&](std::int64_t l1_bytes) {
    TestTarget target = avx2();
    target.l1_bytes = l1_bytes;
    return lower_and_schedule(p, target).schedule_summary;
  };
  EXPECT_NE(chunks_with_l1(32 << 10).find("blk=n2 "), std::string::npos) << chunks_with_l1(32 << 10);
  EXPECT_NE(chunks_with_l1(48 << 10).find("blk=n2 "), std::string::npos) << chunks_with_l1(48 << 10);
  EXPECT_NE(chunks_with_l1(64 << 10).find("blk=n4 "), std::string::npos) << chunks_with_l1(64 << 10);
}

// At one vector FMA a cycle (Zen 1's ymm, Zen 4's zmm) four accumulators already hide the FMA
// latency, so a short tile costs no more per FMA than a tall one. 28 pixels of 128 channels
// then take 3x32 tiles (one 1x32 tail) over 6x16 tiles (one 4x16 tail, 8 column blocks of
// them): on Zen 1 the 3x32 kernel ran 5-7% faster. At two a cycle the 1x32 tail's latency
// bound tips the choice the other way. The rate is part of the target's name (the cache key).
TEST(TileModel, HalfRateFmasTakeWiderShorterTiles) {
  TestTarget half = avx2();
  half.fmas_per_cycle = 1;
  const TileShape full_rate =
      TileModel::of(avx2(), DType::kFloat32).choose(TileForm::kOuterProduct, 28, 128, 9 * 128);
  const TileShape half_rate =
      TileModel::of(half, DType::kFloat32).choose(TileForm::kOuterProduct, 28, 128, 9 * 128);
  EXPECT_EQ(full_rate.rows, 6);
  EXPECT_EQ(full_rate.cols, 16);
  EXPECT_EQ(half_rate.rows, 3);
  EXPECT_EQ(half_rate.cols, 32);
  // Half the rate makes the same tiles slower, and the tile with four accumulators costs as
  // much per FMA as the one with twelve (both bound by the FMA issue, not the latency).
  const TileModel m2 = TileModel::of(avx2(), DType::kFloat32),
                  m1 = TileModel::of(half, DType::kFloat32);
  EXPECT_GT(m1.cycles(TileForm::kOuterProduct, 3, 4, 3, 32, 1000),
            m2.cycles(TileForm::kOuterProduct, 3, 4, 3, 32, 1000));
  const double per_fma_small = m1.cycles(TileForm::kOuterProduct, 1, 4, 1, 32, 1000) / 4;
  const double per_fma_big = m1.cycles(TileForm::kOuterProduct, 3, 4, 3, 32, 1000) / 12;
  EXPECT_NEAR(per_fma_small, per_fma_big, 0.1 * per_fma_big);
}

// vdpbf16ps reduces two points an instruction at the FMAs' issue rate, so a paired bfloat16
// tile costs half an f32 tile's cycles per reduce point, and the filter gradient's chunk rules
// weigh reloads against that. On a Zen 4 core (one zmm instruction a cycle, 32 KiB L1, 1 MiB
// L2, two threads): vgg16's 14x14x512 3x3 layer (9.4 MB of f32 partial sums) reduces every
// pair of a thread's images in one pass instead of reloading the sums per pair (303 -> 492
// GFLOP/s measured), and ResNet-50's 28x28 1x1 layer of 512 -> 128 channels takes chunks of 4
// rows, not 1 (1.06x).
TEST(IrTileModel, PairedBfloat16TilesCountTwoPointsAnInstruction) {
  TestTarget zen4 = testing::avx512_bf16_target(false, 2);
  zen4.fmas_per_cycle = 1;
  zen4.l1_bytes = 32 << 10;
  zen4.l2_bytes = 1 << 20;
  const TileShape tile{6, 64};
  EXPECT_DOUBLE_EQ(2 * TileModel::bf16_dot(zen4).cycles_per_reduce_point(tile),
                   TileModel::of(zen4, DType::kBFloat16).cycles_per_reduce_point(tile));
  auto summary = [&](std::int64_t hw, std::int64_t ic, std::int64_t oc, std::int64_t k) {
    ConvProblem p = backprop_data(DataFormat::kNHWC, 8, hw, ic, oc, k, 1);
    p.direction = ConvDirection::kBackpropFilter;
    p.dtype = DType::kBFloat16;
    return lower_and_schedule(p, zen4).schedule_summary;
  };
  EXPECT_EQ(summary(14, 512, 512, 3).find("blk="), std::string::npos) << summary(14, 512, 512, 3);
  EXPECT_NE(summary(28, 512, 128, 1).find("blk=n,oh4"), std::string::npos)
      << summary(28, 512, 128, 1);
}

// AMX tiles (a bfloat16 data gradient on a core with AMX-BF16): one tdpbf16ps costs about
// the same whatever its rows, so rows come in whole blocks of 16 where the extent has them,
// columns in blocks of 16 accumulators, and the blocks' accumulator, row and column tiles fit
// the eight tile registers. The plan gives the paired tiles that shape: rows past the 14 a
// vector tile stops at.
TEST(TileModel, AmxTilesTakeWholeBlocksOfSixteen) {
  TestTarget amx = avx512();
  amx.has_avx512_bf16 = true;
  amx.has_amx_bf16 = true;
  amx.bf16_dot_beats_fma = false;
  const TileModel m = TileModel::amx(amx);
  auto blocks = [](std::int64_t n) { return (n + 15) / 16; };
  for (std::int64_t row_extent : {12, 16, 54, 56, 112, 3136}) {
    for (std::int64_t col_extent : {24, 64, 256, 2048}) {
      const TileShape s = m.choose(TileForm::kOuterProduct, row_extent, col_extent, 9 * 256);
      const std::int64_t mt = blocks(s.rows), nt = blocks(s.cols);
      EXPECT_LE(mt * nt + mt + nt, 8) << row_extent << " x " << col_extent;
      EXPECT_EQ(s.cols, std::min<std::int64_t>(nt * 16, col_extent));
      // Whole blocks of rows wherever the extent has at least one: no block below 3/4 full.
      if (row_extent >= 16) EXPECT_GE(s.rows * 4, mt * 16 * 3) << row_extent << " rows";
      if (row_extent < 16) EXPECT_EQ(s.rows, row_extent);
    }
  }
  // Wide extents take the 2x2 blocks, which load one tile per tdpbf16ps.
  const TileShape wide = m.choose(TileForm::kOuterProduct, 3136, 256, 9 * 256);
  EXPECT_EQ(wide.rows, 32);
  EXPECT_EQ(wide.cols, 32);
  ConvProblem p = backprop_data(DataFormat::kNHWC, 8, 56, 256, 256, 3, 1);
  p.dtype = DType::kBFloat16;
  const LoopNest nest = lower_and_schedule(p, amx);
  EXPECT_TRUE(std::regex_search(nest.schedule_summary, std::regex(R"(r(1[5-9]|2\d|3[0-2])x32)")))
      << nest.schedule_summary;
  EXPECT_NE(nest.schedule_summary.find("dp2"), std::string::npos) << nest.schedule_summary;
}

// The target's name (part of every cache key) carries each fact that changes the code: the
// FMA rate when it is not two a cycle, and per-core caches other than the defaults. The host's
// caches, whatever the CPU reports, stay within sane bounds.
TEST(CpuInfoName, NamesTheTuningFactsThatChangeCode) {
  TestTarget t = avx2();
  EXPECT_EQ(t.name(), "avx2+f16c");
  t.fmas_per_cycle = 1;
  EXPECT_EQ(t.name(), "avx2+f16c/fma1");
  t.l2_bytes = 512 * 1024;
  EXPECT_EQ(t.name(), "avx2+f16c/fma1/l2=512k");
  t.l1_bytes = 48 * 1024;
  EXPECT_EQ(t.name(), "avx2+f16c/fma1/l1=48k/l2=512k");
  const TestTarget host = host_target(Isa::kAvx512, 1);
  if (host.isa != Isa::kGeneric) {
    EXPECT_GE(host.l1_bytes, 8 << 10);
    EXPECT_LE(host.l1_bytes, 256 << 10);
    EXPECT_GE(host.l2_bytes, 128 << 10);
    EXPECT_LE(host.l2_bytes, 16 << 20);
    EXPECT_TRUE(host.fmas_per_cycle == 1 || host.fmas_per_cycle == 2);
  }
}

}  // namespace
}  // namespace convjit::cpu
