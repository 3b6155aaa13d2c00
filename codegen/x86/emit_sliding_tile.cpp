// The sliding-window form of an elementwise tile. A depthwise input gradient's tile takes rows
// of W positions, and its innermost reduce loop walks the filter's taps along W: row r at tap
// u reads dy at (r - u) (times the dilation), so across the rows and taps the tile reads only
// rows + taps - 1 distinct dy vectors per reduction point of the outer loops, where the plain
// tile loads one per (row, tap) and pays a load per FMA. Here the innermost loop is unrolled
// whole with its taps of the filter held in registers, and each distinct vector of `a` is
// loaded once and multiplied into every accumulator whose (row, tap) reads it.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

bool Emitter::emit_sliding_tile(const ir::Tile& tile, const AccessInfo& a, const AccessInfo& b,
                                const AccessInfo& c) {
  if (tile.rows < 2 || tile.paired) return false;
  // The window loop is the innermost reduce loop of more than one iteration (a depth
  // multiplier of one leaves a single-iteration loop inside it); the loops run without the
  // single-iteration ones after it, whose variables stay at their first value.
  ir::Tile t = tile;
  while (!t.reduce.empty() && t.reduce.back().end - t.reduce.back().begin <= t.reduce.back().step) {
    t.reduce.pop_back();
  }
  if (t.reduce.empty()) return false;
  // Elementwise: a moves with the rows, b is shared by them; both whole vectors along the
  // columns.
  if (a.row_coef == 0 || b.row_coef != 0 || a.shape != ColumnShape::kContiguous ||
      b.shape != ColumnShape::kContiguous || c.shape == ColumnShape::kBroadcast) {
    return false;
  }
  const ir::ReduceLoop& inner = t.reduce.back();
  const std::int64_t taps = (inner.end - inner.begin + inner.step - 1) / inner.step;
  if (taps < 2 || taps > kFullUnrollTrip) return false;
  const std::int64_t a_tap = a.offset.coef_of(inner.var) * inner.step;
  if (a_tap == 0 || b.offset.coef_of(inner.var) == 0) return false;
  // Guards (a whole-width row's W borders) decided here, per (row, tap): they may read only
  // the row, the window loop and variables of known value.
  for (const ir::Guard& g : t.guards) {
    if (g.expr.divisor != 1) return false;
    for (const ir::Term& term : g.expr.numer.terms) {
      if (term.var != t.row_var && term.var != inner.var && !known_.contains(term.var)) {
        return false;
      }
    }
  }
  auto reads = [&](std::int64_t r, std::int64_t u) {
    for (const ir::Guard& g : t.guards) {
      std::int64_t v = g.expr.numer.constant;
      for (const ir::Term& term : g.expr.numer.terms) {
        const std::int64_t value = term.var == t.row_var    ? r
                                   : term.var == inner.var ? inner.begin + u * inner.step
                                                           : known_.at(term.var);
        v += term.coef * value;
      }
      if (v < g.lo || v >= g.hi) return false;
    }
    return true;
  };

  const DType acc = tile_accumulator(a.dtype, b.dtype, c.dtype);
  const bool f64 = acc == DType::kFloat64;
  const std::int64_t vl = lanes(acc);
  const std::int64_t nv = (t.cols + vl - 1) / vl;
  const int tail = static_cast<int>(t.cols - (nv - 1) * vl);
  const int nregs = target_.vector_registers;
  // Registers: rows x vecs accumulators, taps x vecs of b, one temporary for a.
  std::int64_t vg = nv;
  auto rows_fitting = [&](std::int64_t vecs) { return (nregs - 1 - taps * vecs) / vecs; };
  while (vg > 1 && rows_fitting(vg) < 2) --vg;
  const std::int64_t rg = std::min(t.rows, rows_fitting(vg));
  if (rg < 2) return false;
  // Worth it only where the rows share a's vectors: distinct offsets well below rows x taps.
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> readers;
  std::int64_t pairs = 0;
  for (std::int64_t r = 0; r < rg; ++r) {
    for (std::int64_t u = 0; u < taps; ++u) {
      if (!reads(r, u)) continue;
      readers[r * a.row_coef + u * a_tap].push_back({r, u});
      ++pairs;
    }
  }
  if (4 * static_cast<std::int64_t>(readers.size()) > 3 * pairs) return false;

  auto fma = [&](int accr, int x, int y) {
    if (f64) {
      vfmadd231pd(vreg(accr), vreg(x), vreg(y));
    } else {
      vfmadd231ps(vreg(accr), vreg(x), vreg(y));
    }
  };
  auto ref = [&](const AccessInfo& x, std::int64_t elems, std::int64_t v, std::int64_t extra,
                 const Reg64& base) {
    return VecRef{base, (elems + v * vl * x.col_coef) * x.elem_bytes + extra,
                  x.shape == ColumnShape::kStrided ? x.col_coef : 1,
                  v == nv - 1 ? tail : static_cast<int>(vl)};
  };

  // The start offsets and the variables the base pointers leave out: every reduce loop's.
  const ReduceStart start = reduce_start(tile, a, b);
  bind_reduce_counters(t);
  for (std::int64_t v0 = 0; v0 < nv; v0 += vg) {
    const std::int64_t nvg = std::min(vg, nv - v0);
    for (std::int64_t r0 = 0; r0 < t.rows; r0 += rg) {
      const std::int64_t nrg = std::min(rg, t.rows - r0);
      auto acc_reg = [&](std::int64_t r, std::int64_t v) {
        return static_cast<int>((r - r0) * nvg + (v - v0));
      };
      const int b0 = static_cast<int>(nrg * nvg);
      auto b_reg = [&](std::int64_t u, std::int64_t v) {
        return b0 + static_cast<int>(u * nvg + (v - v0));
      };
      const int temp = b0 + static_cast<int>(taps * nvg);

      emit_base_pointer(rsi, a, start.zeroed, start.a_elems + r0 * a.row_coef);
      emit_base_pointer(rdi, b, start.zeroed, start.b_elems);
      emit_base_pointer(r8, c, {t.row_var, t.col_var}, 0);
      k1_count_ = -1;
      if (avx512_ && tail < vl) set_mask(tail);
      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          if (t.accumulate) {
            load_vector(acc_reg(r, v), c.dtype, ref(c, r * c.row_coef, v, 0, r8));
          } else {
            zero_vector(acc_reg(r, v));
          }
        }
      }
      // This row group's readers of each a vector (rows relative to r0).
      std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> group;
      for (std::int64_t r = 0; r < nrg; ++r) {
        for (std::int64_t u = 0; u < taps; ++u) {
          if (reads(r0 + r, u)) group[r * a.row_coef + u * a_tap].push_back({r, u});
        }
      }
      ReduceCursor cur;
      // The innermost loop is unrolled whole: its first copy emits every tap, the rest none.
      auto k_step = [&](std::int64_t u_copy) {
        if (u_copy != 0) return;
        for (std::int64_t u = 0; u < taps; ++u) {
          for (std::int64_t v = v0; v < v0 + nvg; ++v) {
            load_vector(b_reg(u, v), b.dtype, ref(b, 0, v, u * cur.db, rdi));
          }
        }
        for (const auto& [offset, pairs] : group) {
          for (std::int64_t v = v0; v < v0 + nvg; ++v) {
            load_vector(temp, a.dtype, ref(a, offset, v, 0, rsi));
            for (const auto& [r, u] : pairs) fma(acc_reg(r0 + r, v), temp, b_reg(u, v));
          }
        }
      };
      if (!start.empty) emit_reduce_levels(t, a, b, nrg * nvg, &cur, k_step);

      std::vector<TileStore> stores;
      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          stores.push_back({acc_reg(r, v), ref(c, r * c.row_coef, v, 0, r8)});
        }
      }
      emit_tile_stores(t, c, tail == vl, vg * vl, stores, nregs - 1, nregs - 2);
    }
  }
  release_reduce_counters(t);
  k1_count_ = -1;
  return true;
}

}  // namespace convjit::codegen::x86
