// The register-tile cost model. Per reduction point a tile issues one FMA per accumulator (half
// a vdpbf16ps, which takes a pair of points) and loads its operands: a broadcast per row and
// the shared vectors (outer product), or a vector per accumulator plus the shared ones
// (elementwise). The target's FMA rate (two a cycle, or one where the pipes split each vector
// in two) and two load ports bound the throughput, the FMA latency bounds a tile with few
// accumulators, and every tile pays for writing its accumulators back. Summed over the main tiles and the row and column tails, the
// estimate picks the shape; ties go to the first (fewer columns, fewer rows) candidate.
#include "codegen/cpu/tile_model.hpp"

#include "codegen/cpu/register_budget.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace convjit::cpu {
namespace {

// Register file assumed for the scalar core, so the interpreter sees the same shapes.
constexpr int kGenericRegisters = 16;
// Issue ports for loads, and the FMA latency in cycles (common to recent x86).
constexpr double kLoadPorts = 2;
constexpr double kFmaLatency = 4;
// Loads that the ports could absorb still cost cache bandwidth (the shared vectors stream from
// L2 when a tile's reduction outgrows L1): a fraction of their issue time is charged even
// when FMAs bound the step, so of two shapes at peak the one loading less per FMA wins.
constexpr double kLoadPressure = 0.25;
// Cycles a tile pays beside its reduction: pointer setup and the loop around it.
constexpr double kTileOverhead = 8;
// Longest row block considered: beyond it the gain is below the model's accuracy.
constexpr std::int64_t kMaxRows = 14;
constexpr std::int64_t kMaxColVectors = 6;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// AMX. One tdpbf16ps costs about the same whatever its tiles' rows, pairs and columns: on a
// 2026 Xeon, 16 rows ran at 3580 GFLOP/s and 8, 4 and 1 rows at 2200, 1120 and 280 (the same
// 0.8 of the full instruction's time each); 8 of 16 pairs at half the rate. So a tile wants
// whole 16-row, 16-pair, 16-column blocks, and the cost of a shape is the count of products
// it issues. Eight tile registers hold mt x nt accumulators beside mt row tiles and nt column
// tiles: 2x2, or 1x3 and 3x1.
constexpr std::int64_t kAmxRows = 16;        // rows of a tile register
constexpr std::int64_t kAmxColumns = 16;     // f32 accumulators in a row of one
constexpr std::int64_t kAmxPairs = 16;       // bfloat16 pairs in a row of a row tile
constexpr int kAmxTileRegisters = 8;
constexpr double kTdpCycles = 16;            // one tdpbf16ps, issue to issue
// One 1 KiB tile load from L2, where a tile's operands are (a 3x3 filter block of 32 columns
// is 73-147 KB, three rows of dy 50-90 KB): 2x2 blocks streaming both operands from L2 ran
// at 2050 GFLOP/s, 57% of the same blocks in L1, so a step of four loads took 112 cycles
// (the same Xeon). From L1 a load costs 8 and two loads a tdpbf16ps still keep up.
constexpr double kTileLoadCycles = 28;
// Configuring the tiles and storing the accumulators to the frame, per tile; then each row's
// 16 columns are loaded, rounded and stored like a vector tile's.
constexpr double kAmxTileOverhead = 60;
constexpr double kAmxRowStoreCycles = 2;

bool amx_tiles_fit(std::int64_t mt, std::int64_t nt) {
  return mt * nt + mt + nt <= kAmxTileRegisters;
}

}  // namespace

TileModel TileModel::of(const CpuInfo& cpu, DType dtype) {
  TileModel m;
  const int acc_bytes = dtype == DType::kFloat64 ? 8 : 4;
  m.lanes_ = cpu.lanes(acc_bytes);
  m.registers_ = cpu.vector_registers > 0 ? cpu.vector_registers : kGenericRegisters;
  // Only a vector backend streams shared vectors; the scalar target keeps the plain count.
  m.streams_ = cpu.vector_registers > 0;
  m.fmas_per_cycle_ = std::max(cpu.fmas_per_cycle, 1);
  m.vector_bytes_ = cpu.vector_bytes;
  m.l1_bytes_ = cpu.l1_bytes;
  return m;
}

// Rows whose addresses differ by a multiple of an L1 way's span land in one L1 set: with 512
// float channels only every other pixel reaches a new set, and a 12-row tile's taps evicted
// each other (8x14x14x512 3x3: 23 GFLOP/s, 43 at 4 rows, against 49 for 496 channels). So rows
// stop at the pixels that map to distinct sets, but not below 4, where reloading the filter's
// taps for every few rows costs more than the conflicts (measured at 256, 512 and 1024
// channels). With vectors narrower than a cache line (AVX2), rows further apart than a line
// share none, each reads and writes parts of lines of its own, and beyond 4 such rows the tile
// ran at half speed on the AVX2 host (8x112x112x32 3x3: 8.4 ms at 13 rows of one vector,
// 3.6-3.7 ms at 4 rows of one or two; 1x112x112x32: 0.80 against 0.36-0.42 ms). A zmm vector
// is a whole line, and there 12 rows 496 channels apart ran at full speed.
std::int64_t TileModel::elementwise_row_limit(std::int64_t row_stride_bytes) const {
  constexpr std::int64_t kMinRows = 4;
  const std::int64_t way_span = l1_bytes_ / CpuInfo::kL1Ways;
  const std::int64_t stride = std::llabs(row_stride_bytes);
  if (way_span <= 0 || stride == 0) return std::numeric_limits<std::int64_t>::max();
  if (vector_bytes_ < CpuInfo::kCacheLineBytes && stride > CpuInfo::kCacheLineBytes) {
    return kMinRows;
  }
  return std::max(way_span / std::gcd(stride, way_span), kMinRows);
}

// vdpbf16ps issues at the FMAs' rate on the cores that run it (Zen 4: one zmm a cycle, as its
// FMAs; Zen 5: two) and reduces two points per lane. Counting a point as an FMA made every
// reduction rule that weighs a chunk's reloads against its FMA time see twice the FMA time
// there is: on Zen 4 (two threads), whose FMA rate the model halves correctly, the bfloat16
// filter gradients of 7x7-14x14 layers with 256-512 channels then reloaded their partial sums
// per image pair instead of reducing the pairs in one pass (vgg16's 14x14x512 3x3: 303 -> 492
// GFLOP/s counted right), and chunks came out a quarter of the rows (28x28 and 14x14 1x1
// layers 1.06-1.13x).
TileModel TileModel::bf16_dot(const CpuInfo& cpu) {
  TileModel m = of(cpu, DType::kBFloat16);
  m.points_per_instruction_ = 2;
  return m;
}

TileModel TileModel::amx(const CpuInfo& cpu) {
  TileModel m = of(cpu, DType::kBFloat16);
  m.amx_ = true;
  m.lanes_ = kAmxColumns;
  return m;
}

double TileModel::amx_tile_cycles(std::int64_t rows, std::int64_t vecs,
                                  std::int64_t reduce_points) const {
  const std::int64_t mt = ceil_div(rows, kAmxRows);
  const double steps = static_cast<double>(ceil_div(reduce_points, 2 * kAmxPairs));
  const double step = std::max(static_cast<double>(mt * vecs) * kTdpCycles,
                               static_cast<double>(mt + vecs) * kTileLoadCycles);
  return steps * step + kAmxTileOverhead +
         kAmxRowStoreCycles * static_cast<double>(rows * vecs);
}

double TileModel::cycles_per_reduce_point(TileShape shape) const {
  const std::int64_t vecs = ceil_div(shape.cols, lanes_);
  if (!amx_) {
    return static_cast<double>(shape.rows * vecs) /
           (std::max(fmas_per_cycle_, 1.0) * static_cast<double>(points_per_instruction_));
  }
  const std::int64_t mt = ceil_div(shape.rows, kAmxRows);
  const double step = std::max(static_cast<double>(mt * vecs) * kTdpCycles,
                               static_cast<double>(mt + vecs) * kTileLoadCycles);
  return step / static_cast<double>(2 * kAmxPairs);
}

TileShape TileModel::choose_amx(std::int64_t row_extent, std::int64_t col_extent,
                                std::int64_t reduce_points) const {
  TileShape best;
  double best_cycles = -1;
  for (std::int64_t nt = 1; nt <= ceil_div(col_extent, kAmxColumns); ++nt) {
    for (std::int64_t mt = 1; amx_tiles_fit(mt, nt); ++mt) {
      for (std::int64_t r = (mt - 1) * kAmxRows + 1; r <= std::min(mt * kAmxRows, row_extent);
           ++r) {
        const double c =
            cycles(TileForm::kOuterProduct, r, nt, row_extent, col_extent, reduce_points);
        if (best_cycles < 0 || c < best_cycles) {
          best_cycles = c;
          best = {r, std::min(nt * kAmxColumns, col_extent)};
        }
      }
    }
    if (!amx_tiles_fit(1, nt + 1)) break;
  }
  return best;
}

bool TileModel::fits(TileForm form, std::int64_t rows, std::int64_t vecs) const {
  // The shared vectors held in registers beside two temporaries, or (outer product) every
  // row's broadcast held and the shared vectors streamed through one temporary.
  return rows <= held_rows(registers_, vecs, vecs) ||
         (streams_ && form == TileForm::kOuterProduct && rows <= streamed_rows(registers_, vecs));
}

double TileModel::tile_cycles(TileForm form, std::int64_t rows, std::int64_t vecs,
                              std::int64_t reduce_points) const {
  if (amx_ && form == TileForm::kOuterProduct) return amx_tile_cycles(rows, vecs, reduce_points);
  const double acc = static_cast<double>(rows * vecs);
  const double loads = form == TileForm::kElementwise ? acc + static_cast<double>(vecs)
                                                      : static_cast<double>(rows + vecs);
  const double step = std::max({acc / fmas_per_cycle_, loads / kLoadPorts, kFmaLatency}) +
                      kLoadPressure * loads / kLoadPorts;
  const auto instructions = ceil_div(reduce_points, points_per_instruction_);
  return static_cast<double>(instructions) * step + acc + kTileOverhead;
}

double TileModel::cycles(TileForm form, std::int64_t rows, std::int64_t vecs,
                         std::int64_t row_extent, std::int64_t col_extent,
                         std::int64_t reduce_points) const {
  const std::int64_t cols = std::min(vecs * lanes_, col_extent);
  const std::int64_t col_vecs[2] = {ceil_div(cols, lanes_),
                                    ceil_div(col_extent % cols, lanes_)};
  const std::int64_t col_count[2] = {col_extent / cols, col_extent % cols != 0 ? 1 : 0};
  const std::int64_t row_size[2] = {rows, row_extent % rows};
  const std::int64_t row_count[2] = {row_extent / rows, row_extent % rows != 0 ? 1 : 0};
  double total = 0;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      if (row_count[i] == 0 || col_count[j] == 0) continue;
      total += static_cast<double>(row_count[i] * col_count[j]) *
               tile_cycles(form, row_size[i], col_vecs[j], reduce_points);
    }
  }
  return total;
}

TileShape TileModel::choose(TileForm form, std::int64_t row_extent, std::int64_t col_extent,
                            std::int64_t reduce_points, std::int64_t col_granule) const {
  if (form == TileForm::kNone) col_extent = 1;
  if (row_extent < 1 || col_extent < 1) return {};
  if (amx_ && form == TileForm::kOuterProduct) {
    return choose_amx(row_extent, col_extent, std::max<std::int64_t>(reduce_points, 1));
  }
  const std::int64_t max_vecs = std::min(kMaxColVectors, ceil_div(col_extent, lanes_));
  const std::int64_t max_rows = std::min(kMaxRows, row_extent);
  const std::int64_t k = std::max<std::int64_t>(reduce_points, 1);
  TileShape best;
  double best_cycles = -1;
  for (std::int64_t v = 1; v <= max_vecs; ++v) {
    for (std::int64_t r = 1; r <= max_rows; ++r) {
      if (!fits(form, r, v)) break;
      // Streamed tiles only over whole vectors: with a masked vector (vmaskmovps on AVX2) the
      // streamed form measured slower than a held tile plus a column tail (NCHW 26-wide rows).
      const bool held = r <= held_rows(registers_, v, v);
      if (!held && std::min(v * lanes_, col_extent) % lanes_ != 0) continue;
      const std::int64_t cols = std::min(v * lanes_, col_extent);
      if (col_granule > 1 && (cols % col_granule != 0 || col_extent % cols % col_granule != 0)) {
        continue;
      }
      const double c = cycles(form, r, v, row_extent, col_extent, k);
      if (best_cycles < 0 || c < best_cycles) {
        best_cycles = c;
        best = {r, cols};
      }
    }
  }
  // No shape writes whole granules: the plain choice.
  if (best_cycles < 0 && col_granule > 1)
    return choose(form, row_extent, col_extent, reduce_points);
  return best;
}

double TileModel::best_cycles(TileForm form, std::int64_t row_extent, std::int64_t col_extent,
                              std::int64_t reduce_points) const {
  if (form == TileForm::kNone) col_extent = 1;
  if (row_extent < 1 || col_extent < 1) return 0;
  const TileShape s = choose(form, row_extent, col_extent, reduce_points);
  return cycles(form, s.rows, ceil_div(s.cols, lanes_), row_extent, col_extent,
                std::max<std::int64_t>(reduce_points, 1));
}

}  // namespace convjit::cpu
