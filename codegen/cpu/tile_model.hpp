// The register-tile cost model: which rows x cols tile keeps the FMA units busiest for a given
// target, tile form and problem extent. A few machine constants and a formula, never a table
// of shapes.
#pragma once

#include <cstdint>

#include "convjit/types.hpp"
#include "codegen/cpu/cpu_info.hpp"

namespace convjit::cpu {

/// How a tile's operands vary along its column variable.
enum class TileForm : std::uint8_t {
  kNone,          // no vector column: cols stays 1
  kOuterProduct,  // a broadcast per row, b a vector shared by all rows
  kElementwise,   // a a vector per row, b a vector shared by all rows (depthwise)
};

/// A chosen tile: rows x cols elements.
struct TileShape {
  std::int64_t rows = 1;
  std::int64_t cols = 1;
};

/// Estimates the cycles of a tiled row x column extent and picks the cheapest shape.
class TileModel {
 public:
  /// The model for `target` and elements of `dtype` (accumulated in f32 or f64).
  static TileModel of(const CpuInfo& cpu, DType dtype);
  /// The model for bfloat16 tiles the x86 emitter runs on AMX (CpuInfo::has_amx_bf16): rows
  /// in blocks of 16 (one tile register's rows), columns in blocks of 16 f32 accumulators,
  /// at most the blocks whose accumulator, row and column tiles fit the eight tile registers.
  static TileModel amx(const CpuInfo& cpu);
  /// The model for bfloat16 tiles on vdpbf16ps (CpuInfo::uses_bf16_dot): each instruction
  /// multiplies a pair of reduce points into an f32 accumulator at the FMAs' issue rate, so
  /// a reduce point costs half an FMA tile's.
  static TileModel bf16_dot(const CpuInfo& cpu);

  /// Best tile for `row_extent` x `col_extent` outputs, each a reduction of `reduce_points`.
  /// `row_extent` 1 means no row blocking; `form` kNone forces cols = 1. With `col_granule`
  /// above 1, the main tile's and the column tail's cols are both multiples of it when some
  /// shape allows that (whole cache lines per row, which streamed stores need).
  TileShape choose(TileForm form, std::int64_t row_extent, std::int64_t col_extent,
                   std::int64_t reduce_points, std::int64_t col_granule = 1) const;

  /// Estimated cycles of the whole extent with the tile choose() picks for it.
  double best_cycles(TileForm form, std::int64_t row_extent, std::int64_t col_extent,
                     std::int64_t reduce_points) const;

  /// Rows an elementwise (depthwise) tile may take when its rows stream vectors
  /// `row_stride_bytes` apart: they stop at the rows that map to distinct L1 sets.
  std::int64_t elementwise_row_limit(std::int64_t row_stride_bytes) const;

  /// Cycles one more reduce point adds to an outer-product tile of `shape` (rows x columns):
  /// its FMAs, or on AMX its share of a step of 16 pairs.
  double cycles_per_reduce_point(TileShape shape) const;

  /// Vector lanes of one accumulator register.
  std::int64_t lanes() const { return lanes_; }

  /// Whether rows x vecs accumulators and the operands the x86 emitter keeps beside them fit
  /// the register file: the shared vectors and two temporaries, or, for an outer product,
  /// every row's broadcast and one temporary the shared vectors stream through (vector targets).
  bool fits(TileForm form, std::int64_t rows, std::int64_t vecs) const;

  /// Estimated cycles of the whole extent tiled as rows x vecs vectors.
  double cycles(TileForm form, std::int64_t rows, std::int64_t vecs, std::int64_t row_extent,
                std::int64_t col_extent, std::int64_t reduce_points) const;

 private:
  /// Cycles of one tile of `rows` x `vecs` vectors over `reduce_points`.
  double tile_cycles(TileForm form, std::int64_t rows, std::int64_t vecs,
                     std::int64_t reduce_points) const;
  /// The same on AMX, `vecs` being 16-column blocks.
  double amx_tile_cycles(std::int64_t rows, std::int64_t vecs,
                         std::int64_t reduce_points) const;
  TileShape choose_amx(std::int64_t row_extent, std::int64_t col_extent,
                       std::int64_t reduce_points) const;

  std::int64_t lanes_ = 1;
  int registers_ = 16;
  int vector_bytes_ = 0;
  std::int64_t l1_bytes_ = CpuInfo::kDefaultL1Bytes;
  bool streams_ = false;
  bool amx_ = false;
  double fmas_per_cycle_ = 2;
  // Reduce points one multiply-add instruction covers per accumulator lane.
  std::int64_t points_per_instruction_ = 1;
};

}  // namespace convjit::cpu
