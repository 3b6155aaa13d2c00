// The paired bfloat16 tile (pair_reduction, ir.hpp): acc[r][v] += a*b + a2*b2 as one
// `vdpbf16ps` per (row, vector) per pair of reduction points. Each row's pair is one dword
// of a, broadcast once into a temporary that all of the row's vectors read (with one vector,
// read by the instruction itself as {1to16}); b's interleaved pairs are dword lanes, loaded
// once per pair and shared by all rows. A {1to16} operand on every instruction made a step
// of 7 rows x 3 vectors issue 24 loads for 21 `vdpbf16ps` instead of 10, and on Zen 5 the
// load ports, not the dot products, bounded it (about 52% of the `vdpbf16ps` peak).
// Accumulators are f32, loaded from and rounded once to c like every other tile's.
#include <algorithm>

#include "codegen/cpu/register_budget.hpp"
#include "codegen/x86/emitter.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

void Emitter::emit_paired_tile(const ir::Tile& t) {
  // A guard that varies by row holds for some rows only: run the rows one at a time, each
  // with guards that no longer depend on it (column guards were split by emit_tile).
  for (const ir::Guard& g : t.guards) {
    if (t.rows > 1 && g.expr.numer.coef_of(t.row_var) != 0) {
      for (std::int64_t r = 0; r < t.rows; ++r) {
        ir::Tile one = t;
        one.rows = 1;
        ir::substitute(one, t.row_var, ir::Affine::constant_of(r));
        emit_paired_tile(one);
      }
      return;
    }
  }
  AccessInfo a, b, c;
  // check_nest() accepted the tile: a is a per-row broadcast of adjacent pairs, b interleaved
  // pairs along the column.
  analyze_access(nest_, t.a, t.row_var, t.col_var, t.cols, &a);
  analyze_access(nest_, t.b, t.row_var, t.col_var, t.cols, &b);
  analyze_access(nest_, t.c, t.row_var, t.col_var, t.cols, &c);
  if (emit_amx_tile(t, a, b, c)) return;
  const std::int64_t vl = lanes(DType::kFloat32);
  const std::int64_t nv = (t.cols + vl - 1) / vl;
  const int tail = static_cast<int>(t.cols - (nv - 1) * vl);
  const int nregs = target_.vector_registers;
  const int t1 = nregs - 1;
  const int t2 = nregs - 2;
  // Accumulators and one register per shared b vector, beside the two store temporaries.
  const std::int64_t vg = std::min<std::int64_t>(nv, (nregs - cpu::kTileTemporaries) / 2);
  const std::int64_t rg = std::max<std::int64_t>(1, std::min(t.rows, cpu::held_rows(nregs, vg, vg)));

  bind_reduce_counters(t);
  const ReduceStart start = reduce_start(t, a, b);
  auto ref_of = [&](const AccessInfo& x, std::int64_t r, std::int64_t v, const Reg64& base) {
    VecRef ref{base, 0, 1, v == nv - 1 ? tail : static_cast<int>(vl)};
    ref.disp = (r * x.row_coef + v * vl * x.col_coef) * x.elem_bytes;
    ref.lane_stride = x.shape == ColumnShape::kStrided ? x.col_coef : 1;
    return ref;
  };

  for (std::int64_t v0 = 0; v0 < nv; v0 += vg) {
    const std::int64_t nvg = std::min(vg, nv - v0);
    for (std::int64_t r0 = 0; r0 < t.rows; r0 += rg) {
      const std::int64_t nrg = std::min(rg, t.rows - r0);
      auto acc_reg = [&](std::int64_t r, std::int64_t v) {
        return static_cast<int>((r - r0) * nvg + (v - v0));
      };
      const int b0 = static_cast<int>(nrg * nvg);

      emit_base_pointer(rsi, a, start.zeroed, start.a_elems);
      emit_base_pointer(rdi, b, start.zeroed, start.b_elems);
      emit_base_pointer(r8, c, {t.row_var, t.col_var}, 0);
      k1_count_ = -1;

      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          if (t.accumulate) {
            load_vector(acc_reg(r, v), c.dtype, ref_of(c, r, v, r8));
          } else {
            zero_vector(acc_reg(r, v));
          }
        }
      }

      ReduceCursor cur;
      auto k_step = [&](std::int64_t u) {
        emit_next_rows_prefetch(t, a, rsi, cur.da, r0, nrg, cur, u);
        Label skip;
        bool any_guard = false;
        // The tail's mask is set before the guards: a step whose guard fails jumps past
        // everything below, and the stores after the reduction rely on k1 holding it.
        if (v0 + nvg == nv && tail < vl) set_mask(tail);
        for (const ir::Guard& g : t.guards) {
          emit_guard_check(g, -1, 0, cur.inner_var, u * cur.inner_step, skip);
          any_guard = true;
        }
        // b: `lanes` pairs (one dword each) per vector, a tail masked to its pairs.
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          const Zmm dst(b0 + static_cast<int>(v - v0));
          const Address src =
              ptr[rdi + static_cast<std::int32_t>(v * vl * 4 + u * cur.db)];
          if (v == nv - 1 && tail < vl) {
            set_mask(tail);
            vmovdqu32(dst | k1 | T_z, src);
          } else {
            vmovdqu32(dst, src);
          }
        }
        for (std::int64_t r = r0; r < r0 + nrg; ++r) {
          const std::int32_t disp =
              static_cast<std::int32_t>(r * a.row_coef * a.elem_bytes + u * cur.da);
          if (nvg == 1) {
            vdpbf16ps(Zmm(acc_reg(r, v0)), Zmm(b0), ptr_b[rsi + disp]);
            continue;
          }
          vpbroadcastd(Zmm(t1), ptr[rsi + disp]);
          for (std::int64_t v = v0; v < v0 + nvg; ++v) {
            vdpbf16ps(Zmm(acc_reg(r, v)), Zmm(b0 + static_cast<int>(v - v0)), Zmm(t1));
          }
        }
        if (any_guard) L(skip);
      };
      if (!start.empty) emit_reduce_levels(t, a, b, nrg * nvg, &cur, k_step);

      std::vector<TileStore> stores;
      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          stores.push_back({acc_reg(r, v), ref_of(c, r, v, r8)});
        }
      }
      emit_tile_stores(t, c, tail == vl, vg * vl, stores, t1, t2);
    }
  }
  release_reduce_counters(t);
  k1_count_ = -1;
}

}  // namespace convjit::codegen::x86
