// Access flattening and the x86 emitter's support check.
#include "codegen/x86/access_info.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace convjit::codegen::x86 {
namespace {

// The largest unrolled copy index the emitter folds into a displacement (see tile emission).
constexpr std::int64_t kMaxUnrollDisplacementSteps = 16;

bool depends_on(const ir::Affine& a, ir::VarId v) { return v >= 0 && a.coef_of(v) != 0; }

class NestChecker {
 public:
  NestChecker(const ir::LoopNest& nest, bool avx512, bool has_f16c, bool has_avx512_bf16)
      : nest_(nest), avx512_(avx512), has_f16c_(has_f16c), has_avx512_bf16_(has_avx512_bf16) {}

  bool check(std::string* why) {
    for (const ir::Buffer& b : nest_.buffers) {
      if (b.dtype == DType::kHalf && !has_f16c_) return fail(why, "half needs F16C");
    }
    for (const ir::Stmt& s : nest_.body) {
      if (!check_stmt(s, why)) return false;
    }
    return true;
  }

 private:
  bool fail(std::string* why, std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
  }

  bool check_stmt(const ir::Stmt& s, std::string* why) {
    if (const auto* loop = std::get_if<ir::Loop>(&s.node)) {
      if (loop->step < 1) return fail(why, fmt::format("loop step {} < 1", loop->step));
      if (!fits_int32(loop->begin) || !fits_int32(loop->end + loop->step)) {
        return fail(why, "loop bounds beyond 32 bits");
      }
      for (const ir::Stmt& b : loop->body) {
        if (!check_stmt(b, why)) return false;
      }
      return true;
    }
    if (const auto* tile = std::get_if<ir::Tile>(&s.node)) return check_tile(*tile, why);
    return check_store(std::get<ir::Store>(s.node), why);
  }

  bool check_tile(const ir::Tile& t, std::string* why) {
    AccessInfo a, b, c;
    if (!analyze_access(nest_, t.a, t.row_var, t.col_var, t.cols, &a) ||
        !analyze_access(nest_, t.b, t.row_var, t.col_var, t.cols, &b) ||
        !analyze_access(nest_, t.c, t.row_var, t.col_var, t.cols, &c)) {
      return fail(why, "a tile access keeps an index divisor (stride-residue split missing)");
    }
    if (t.rows < 1 || t.cols < 1) return fail(why, "empty tile");
    if (t.paired && !check_pairs(t, a, b, why)) return false;
    const bool any_f64 = a.dtype == DType::kFloat64 || b.dtype == DType::kFloat64 ||
                         c.dtype == DType::kFloat64;
    const bool all_f64 = a.dtype == DType::kFloat64 && b.dtype == DType::kFloat64 &&
                         c.dtype == DType::kFloat64;
    if (any_f64 && !all_f64) return fail(why, "tile mixes float64 with other dtypes");
    for (const ir::ReduceLoop& r : t.reduce) {
      if (r.step < 1) return fail(why, "reduce step < 1");
      if (depends_on(c.offset, r.var)) return fail(why, "tile output depends on a reduce var");
      if (!fits_int32(r.begin) || !fits_int32(r.end + r.step)) {
        return fail(why, "reduce bounds beyond 32 bits");
      }
      for (const AccessInfo* x : {&a, &b}) {
        const std::int64_t delta = x->offset.coef_of(r.var) * r.step * x->elem_bytes;
        if (!fits_int32(delta * kMaxUnrollDisplacementSteps)) {
          return fail(why, "reduce step displacement beyond 32 bits");
        }
      }
    }
    // Guards along the column are fine: the emitter then runs the tile column by column.
    for (const ir::Guard& g : t.guards) {
      if (g.expr.divisor < 1) return fail(why, "guard divisor < 1");
    }
    const std::int64_t lanes = 64;  // widest vector in elements, bounds the column offsets
    for (const AccessInfo* x : {&a, &b, &c}) {
      const std::int64_t row_span = std::llabs(x->row_coef) * (t.rows - 1) * x->elem_bytes;
      const std::int64_t col_span =
          std::llabs(x->col_coef == 0 ? 1 : x->col_coef) * (t.cols + lanes) * x->elem_bytes;
      if (!fits_int32(row_span + col_span)) return fail(why, "tile displacement beyond 32 bits");
    }
    (void)avx512_;
    return true;
  }

  // A paired tile: vdpbf16ps reads a's pair as one broadcast dword and b's pairs as dword
  // lanes, so a2 and b2 must be the elements right after a and b, all bfloat16, with b's
  // pairs interleaved along the column.
  bool check_pairs(const ir::Tile& t, const AccessInfo& a, const AccessInfo& b,
                   std::string* why) {
    AccessInfo a2, b2;
    if (!analyze_access(nest_, t.a2, t.row_var, t.col_var, t.cols, &a2) ||
        !analyze_access(nest_, t.b2, t.row_var, t.col_var, t.cols, &b2)) {
      return fail(why, "a paired tile access keeps an index divisor");
    }
    if (!avx512_ || !has_avx512_bf16_) return fail(why, "paired tiles need avx512_bf16");
    for (const AccessInfo* x : std::initializer_list<const AccessInfo*>{&a, &b, &a2, &b2}) {
      if (x->dtype != DType::kBFloat16) return fail(why, "paired tile operand not bfloat16");
    }
    if (a2.buffer != a.buffer || a2.offset != a.offset + 1 || b2.buffer != b.buffer ||
        b2.offset != b.offset + 1) {
      return fail(why, "paired tile pairs are not adjacent elements");
    }
    if (a.col_coef != 0 || b.row_coef != 0 || (t.cols > 1 && b.col_coef != 2)) {
      return fail(why, "paired tile is not an outer product over interleaved pairs");
    }
    return true;
  }

  bool check_store(const ir::Store& s, std::string* why) {
    AccessInfo d, src;
    if (!analyze_access(nest_, s.dst, -1, -1, 1, &d) ||
        (s.has_src && !analyze_access(nest_, s.src, -1, -1, 1, &src))) {
      return fail(why, "a store access keeps an index divisor");
    }
    return true;
  }

  const ir::LoopNest& nest_;
  bool avx512_;
  bool has_f16c_;
  bool has_avx512_bf16_;
};

}  // namespace

bool analyze_access(const ir::LoopNest& nest, const ir::Access& access, ir::VarId row_var,
                    ir::VarId col_var, std::int64_t cols, AccessInfo* info) {
  if (access.buffer < 0 || static_cast<std::size_t>(access.buffer) >= nest.buffers.size()) {
    return false;
  }
  const ir::Buffer& buf = nest.buffers[static_cast<std::size_t>(access.buffer)];
  if (access.index.size() != buf.strides.size()) return false;
  info->buffer = access.buffer;
  info->dtype = buf.dtype;
  info->elem_bytes = dtype_size(buf.dtype);
  if (!ir::flatten_access(nest, access, &info->offset)) return false;
  info->row_coef = row_var >= 0 ? info->offset.coef_of(row_var) : 0;
  info->col_coef = col_var >= 0 ? info->offset.coef_of(col_var) : 0;
  if (info->col_coef == 0 || cols <= 1) {
    info->shape = ColumnShape::kBroadcast;
  } else if (info->col_coef == 1) {
    info->shape = ColumnShape::kContiguous;
  } else {
    info->shape = ColumnShape::kStrided;
  }
  return true;
}

DType tile_accumulator(DType a, DType b, DType c) {
  return (a == DType::kFloat64 || b == DType::kFloat64 || c == DType::kFloat64) ? DType::kFloat64
                                                                                : DType::kFloat32;
}

bool check_nest(const ir::LoopNest& nest, bool avx512, bool has_f16c, bool has_avx512_bf16,
                std::string* why_not) {
  return NestChecker(nest, avx512, has_f16c, has_avx512_bf16).check(why_not);
}

}  // namespace convjit::codegen::x86
