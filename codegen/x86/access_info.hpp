// How the x86 emitter sees one IR access: a flattened affine offset (in elements) split into
// the parts that become a pointer register, per-row / per-column displacements and pointer
// bumps. Pure analysis, no machine code: shared by supports() and the emitter.
#pragma once

#include <cstdint>
#include <string>

#include "convjit/types.hpp"
#include "ir/ir.hpp"

namespace convjit::codegen::x86 {

/// How an operand varies along the tile's column (vector) variable.
enum class ColumnShape : std::uint8_t {
  kBroadcast,   // one element for all lanes
  kContiguous,  // consecutive elements, one vector load
  kStrided,     // lanes `col_coef` elements apart: gathered lane by lane
};

/// One access of a Tile or Store, flattened.
struct AccessInfo {
  int buffer = 0;
  DType dtype = DType::kFloat32;
  int elem_bytes = 4;
  /// Offset in elements over every variable (row and column variables included).
  ir::Affine offset;
  std::int64_t row_coef = 0;  // elements per row step
  std::int64_t col_coef = 0;  // elements per column (lane) step
  ColumnShape shape = ColumnShape::kBroadcast;
};

/// Flattens `access`; `row_var` / `col_var` may be -1 (Store). `cols` of 1 makes every
/// operand a broadcast (there is only one lane). Returns false when an index keeps a divisor.
bool analyze_access(const ir::LoopNest& nest, const ir::Access& access, ir::VarId row_var,
                    ir::VarId col_var, std::int64_t cols, AccessInfo* info);

/// Whether `value` fits a sign-extended 32-bit immediate or displacement.
inline bool fits_int32(std::int64_t value) {
  return value >= INT32_MIN && value <= INT32_MAX;
}

/// Accumulator type of a tile whose operands have these dtypes: f64 if any is f64.
DType tile_accumulator(DType a, DType b, DType c);

/// Checks that the emitter can compile `nest` for the given ISA capabilities; on refusal
/// `why_not` names the construct.
bool check_nest(const ir::LoopNest& nest, bool avx512, bool has_f16c, bool has_avx512_bf16,
                std::string* why_not);

}  // namespace convjit::codegen::x86
