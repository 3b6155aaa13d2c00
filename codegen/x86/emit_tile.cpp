// The register-tile node: acc[rows][cols] in vector registers, the reduction as counted loops
// with pointer bumps (the innermost unrolled, its copies folded into displacements), one FMA
// per (row, vector) per reduction point. An operand that varies per row is read straight
// from memory by the FMA where it can be (an embedded {1toN} broadcast on AVX-512, or a full
// vector); operands shared by all rows are loaded once per reduction point.
#include <algorithm>
#include <optional>

#include "codegen/cpu/register_budget.hpp"
#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

namespace {

ir::IndexExpr with_column(const ir::IndexExpr& e, ir::VarId col_var, std::int64_t column) {
  return ir::IndexExpr(e.numer.substitute(col_var, ir::Affine::constant_of(column)), e.divisor);
}

ir::Access with_column(const ir::Access& a, ir::VarId col_var, std::int64_t column) {
  ir::Access out = a;
  for (ir::IndexExpr& e : out.index) e = with_column(e, col_var, column);
  return out;
}

// Column `column` of `t` as a one-column tile: the column variable replaced by a constant.
ir::Tile column_of(const ir::Tile& t, std::int64_t column) {
  ir::Tile one = t;
  one.cols = 1;
  one.a = with_column(t.a, t.col_var, column);
  one.b = with_column(t.b, t.col_var, column);
  one.c = with_column(t.c, t.col_var, column);
  if (t.paired) {
    one.a2 = with_column(t.a2, t.col_var, column);
    one.b2 = with_column(t.b2, t.col_var, column);
  }
  for (ir::Guard& g : one.guards) g.expr = with_column(g.expr, t.col_var, column);
  return one;
}

}  // namespace

void Emitter::emit_guard_check(const ir::Guard& guard, ir::VarId row_var, std::int64_t row,
                               ir::VarId inner_var, std::int64_t inner_offset, Label& skip) {
  if (guard.hi <= guard.lo) {
    jmp(skip, T_NEAR);
    return;
  }
  ir::Affine e;
  e.constant = guard.expr.numer.constant;
  for (const ir::Term& t : guard.expr.numer.terms) {
    if (t.var == row_var) {
      e.constant += t.coef * row;
    } else {
      e.terms.push_back(t);
      if (t.var == inner_var) e.constant += t.coef * inner_offset;
    }
  }
  emit_affine(rdx, e, 1, /*accumulate=*/false);
  if (guard.expr.divisor > 1) {
    mov(rax, rdx);
    cqo();
    mov(rcx, static_cast<std::uint64_t>(guard.expr.divisor));
    idiv(rcx);
    test(rdx, rdx);
    jnz(skip, T_NEAR);
    mov(rdx, rax);
  }
  // lo <= v < hi  <=>  (v - lo) < (hi - lo) as unsigned.
  add_imm(rdx, -guard.lo);
  const std::int64_t span = guard.hi - guard.lo;
  if (fits_int32(span)) {
    cmp(rdx, static_cast<std::uint32_t>(span));
  } else {
    mov(rcx, static_cast<std::uint64_t>(span));
    cmp(rdx, rcx);
  }
  jae(skip, T_NEAR);
}

void Emitter::emit_tile(const ir::Tile& t) {
  // A guard that varies along the columns holds for some lanes only (a border tile vectorized
  // across the border, as small or dilated problems get): such a tile runs one column at a
  // time, each with guards that no longer depend on the lane. Any lane masking would also
  // have to keep the masked lanes' loads in bounds, which per-column code gets for free. A
  // one-column tile goes through here too: its column variable lives in no register or slot.
  for (const ir::Guard& g : t.guards) {
    if (g.expr.numer.coef_of(t.col_var) != 0) {
      for (std::int64_t v = 0; v < t.cols; ++v) emit_tile(column_of(t, v));
      return;
    }
  }
  if (t.paired) {
    emit_paired_tile(t);
    return;
  }
  AccessInfo a, b, c;
  // check_nest() accepted the tile, so the analysis succeeds.
  analyze_access(nest_, t.a, t.row_var, t.col_var, t.cols, &a);
  analyze_access(nest_, t.b, t.row_var, t.col_var, t.cols, &b);
  analyze_access(nest_, t.c, t.row_var, t.col_var, t.cols, &c);
  if (emit_sliding_tile(t, a, b, c)) return;
  const DType acc = tile_accumulator(a.dtype, b.dtype, c.dtype);
  const bool f64 = acc == DType::kFloat64;
  const std::int64_t vl = lanes(acc);
  const std::int64_t nv = (t.cols + vl - 1) / vl;
  const int tail = static_cast<int>(t.cols - (nv - 1) * vl);
  const int nregs = target_.vector_registers;
  const int ta = nregs - 1;
  const int tb = nregs - 2;

  bool row_guard = false;
  for (const ir::Guard& g : t.guards) row_guard = row_guard || g.expr.numer.coef_of(t.row_var) != 0;
  // With a per-row guard every operand is loaded under that row's check: a guard may be what
  // keeps an access in bounds.
  auto per_row = [&](const AccessInfo& x) { return x.row_coef != 0 || row_guard; };
  auto mem_eligible = [&](const AccessInfo& x) {
    return x.dtype == acc && ((x.shape == ColumnShape::kBroadcast && avx512_) ||
                              x.shape == ColumnShape::kContiguous);
  };
  auto shared_count = [&](const AccessInfo& x, std::int64_t vg) -> std::int64_t {
    if (per_row(x)) return 0;
    return x.shape == ColumnShape::kBroadcast ? 1 : vg;
  };
  // Largest vector group, then the most rows that fit beside it and two temporaries.
  std::int64_t vg = nv;
  while (vg > 1 && cpu::held_rows(nregs, vg, shared_count(a, vg) + shared_count(b, vg)) < 1) --vg;
  std::int64_t rg = std::max<std::int64_t>(
      1, std::min(t.rows, cpu::held_rows(nregs, vg, shared_count(a, vg) + shared_count(b, vg))));
  // An outer product can instead keep every row's broadcast in a register and stream the
  // shared vectors through one temporary, each loaded once and used by all rows: `rows`
  // extra registers instead of `vecs`, which for wide rows (2 x 6 vectors on AVX2) is what
  // lets the whole tile's accumulators live at once. Loads per step are the same either
  // way; more accumulators hide the FMA latency and cut the passes over the reduction. With
  // equal accumulators and several vectors the two are equivalent and the streaming form is
  // taken; a single vector keeps the first form, whose broadcast can be the FMA's operand.
  const AccessInfo* row_op = nullptr;
  const AccessInfo* vec_op = nullptr;
  if (!row_guard && per_row(a) != per_row(b)) {
    row_op = per_row(a) ? &a : &b;
    vec_op = per_row(a) ? &b : &a;
    if (row_op->shape != ColumnShape::kBroadcast || vec_op->shape == ColumnShape::kBroadcast) {
      row_op = vec_op = nullptr;
    }
  }
  bool stream = false;
  if (row_op != nullptr && t.rows > 1) {
    const std::int64_t rg_stream = std::min(t.rows, cpu::streamed_rows(nregs, nv));
    const std::int64_t held = std::min(rg, t.rows) * std::min(vg, nv);
    if (rg_stream * nv > held || (rg_stream * nv == held && nv > 1)) {
      stream = true;
      vg = nv;
      rg = rg_stream;
    }
  }
  // At most one operand is read by the FMA itself. A per-row broadcast used by several
  // vectors is loaded once into a temporary instead (one load feeding `vg` FMAs beats `vg`
  // embedded-broadcast loads); used by one vector, {1toN} saves the separate load.
  auto mem_usable = [&](const AccessInfo& x) {
    return per_row(x) && mem_eligible(x) && !(x.shape == ColumnShape::kBroadcast && vg > 1);
  };
  int mem_op = -1;
  if (mem_usable(a)) {
    mem_op = 0;
  } else if (mem_usable(b)) {
    mem_op = 1;
  }
  // With one row a shared vector feeds a single FMA: loading it into a register first only
  // adds an instruction, so the FMA reads it from memory (full vectors; a tail still goes
  // through its register).
  int mem_shared = -1;
  if (!stream && std::min(rg, t.rows) == 1 && mem_op < 0) {
    auto direct = [&](const AccessInfo& x) {
      return !per_row(x) && x.dtype == acc && x.shape == ColumnShape::kContiguous;
    };
    if (direct(b)) {
      mem_shared = 1;
    } else if (direct(a)) {
      mem_shared = 0;
    }
  }

  bind_reduce_counters(t);
  const ReduceStart start = reduce_start(t, a, b);
  auto ref_of = [&](const AccessInfo& x, std::int64_t r, std::int64_t v, std::int64_t extra,
                    const Reg64& base) {
    VecRef ref{base, 0, 1, v == nv - 1 ? tail : static_cast<int>(vl)};
    ref.disp = (r * x.row_coef + v * vl * x.col_coef) * x.elem_bytes + extra;
    ref.lane_stride = x.shape == ColumnShape::kStrided ? x.col_coef : 1;
    return ref;
  };
  auto fma = [&](int accr, const Xmm& x, const Operand& y) {
    if (f64) {
      vfmadd231pd(vreg(accr), x, y);
    } else {
      vfmadd231ps(vreg(accr), x, y);
    }
  };

  for (std::int64_t v0 = 0; v0 < nv; v0 += vg) {
    const std::int64_t nvg = std::min(vg, nv - v0);
    for (std::int64_t r0 = 0; r0 < t.rows; r0 += rg) {
      const std::int64_t nrg = std::min(rg, t.rows - r0);
      auto acc_reg = [&](std::int64_t r, std::int64_t v) {
        return static_cast<int>((r - r0) * nvg + (v - v0));
      };
      const int shared_a = static_cast<int>(nrg * nvg);
      const int shared_b = shared_a + static_cast<int>(shared_count(a, nvg));

      emit_base_pointer(rsi, a, start.zeroed, start.a_elems);
      emit_base_pointer(rdi, b, start.zeroed, start.b_elems);
      emit_base_pointer(r8, c, {t.row_var, t.col_var}, 0);
      k1_count_ = -1;
      if (avx512_ && tail < vl) set_mask(tail);

      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          if (t.accumulate) {
            load_vector(acc_reg(r, v), c.dtype, ref_of(c, r, v, 0, r8));
          } else {
            zero_vector(acc_reg(r, v));
          }
        }
      }

      // One reduction point; `u` is the unrolled copy of the innermost loop (`cur.da`,
      // `cur.db` its pointer steps in bytes).
      ReduceCursor cur;
      auto load_shared = [&](const AccessInfo& x, int which, int base, std::int64_t disp0,
                             const Reg64& ptr_reg) {
        if (x.shape == ColumnShape::kBroadcast) {
          load_broadcast(base, x.dtype, ptr_reg + static_cast<std::int32_t>(disp0));
          return;
        }
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          const VecRef ref = ref_of(x, 0, v, disp0, ptr_reg);
          if (mem_shared == which && ref.count == vl) continue;
          load_vector(base + static_cast<int>(v - v0), x.dtype, ref);
        }
      };
      // The bytes an operand reads at one point for this row and column group, from its first:
      // a broadcast's rows, or (without rows) its columns' vectors; none otherwise.
      auto next_block_bytes = [&](const AccessInfo& x) -> std::pair<std::int64_t, std::int64_t> {
        if (x.shape == ColumnShape::kBroadcast) {
          return {r0 * x.row_coef * x.elem_bytes, ((nrg - 1) * x.row_coef + 1) * x.elem_bytes};
        }
        if (x.shape == ColumnShape::kContiguous && x.row_coef == 0) {
          return {v0 * vl * x.elem_bytes, nvg * vl * x.elem_bytes};
        }
        return {0, 0};
      };
      // Pairs, not structured bindings: k_step captures them, and clang before 16 refuses to
      // capture a structured binding.
      const std::pair<std::int64_t, std::int64_t> a_span = next_block_bytes(a);
      const std::pair<std::int64_t, std::int64_t> b_span = next_block_bytes(b);
      auto k_step = [&](std::int64_t u) {
        emit_next_rows_prefetch(t, a, rsi, cur.da, r0, nrg, cur, u);
        emit_next_rows_prefetch(t, b, rdi, cur.db, r0, nrg, cur, u);
        emit_next_block_prefetch(a, t.prefetch_next_block_a, rsi, cur.da, u, a_span.first,
                                 a_span.second);
        emit_next_block_prefetch(b, t.prefetch_next_block_b, rdi, cur.db, u, b_span.first,
                                 b_span.second);
        Label skip;
        bool any_guard = false;
        for (const ir::Guard& g : t.guards) {
          if (g.expr.numer.coef_of(t.row_var) != 0) continue;
          emit_guard_check(g, -1, 0, cur.inner_var, u * cur.inner_step, skip);
          any_guard = true;
        }
        if (stream) {
          // Registers: accumulators, then one broadcast per row, then the vector temporary.
          const bool row_is_a = row_op == &a;
          const Reg64& row_ptr = row_is_a ? rsi : rdi;
          const Reg64& vec_ptr = row_is_a ? rdi : rsi;
          const std::int64_t row_disp = u * (row_is_a ? cur.da : cur.db);
          const std::int64_t vec_disp = u * (row_is_a ? cur.db : cur.da);
          const int bcast0 = static_cast<int>(nrg * nvg);
          const int temp = bcast0 + static_cast<int>(nrg);
          for (std::int64_t r = r0; r < r0 + nrg; ++r) {
            load_broadcast(bcast0 + static_cast<int>(r - r0), row_op->dtype,
                           row_ptr + static_cast<std::int32_t>(
                                         r * row_op->row_coef * row_op->elem_bytes + row_disp));
          }
          for (std::int64_t v = v0; v < v0 + nvg; ++v) {
            load_vector(temp, vec_op->dtype, ref_of(*vec_op, 0, v, vec_disp, vec_ptr));
            for (std::int64_t r = r0; r < r0 + nrg; ++r) {
              fma(acc_reg(r, v), vreg(bcast0 + static_cast<int>(r - r0)), vreg(temp));
            }
          }
          if (any_guard) L(skip);
          return;
        }
        if (!per_row(a)) load_shared(a, 0, shared_a, u * cur.da, rsi);
        if (!per_row(b)) load_shared(b, 1, shared_b, u * cur.db, rdi);
        for (std::int64_t r = r0; r < r0 + nrg; ++r) {
          Label skip_row;
          bool row_checked = false;
          for (const ir::Guard& g : t.guards) {
            if (g.expr.numer.coef_of(t.row_var) == 0) continue;
            emit_guard_check(g, t.row_var, r, cur.inner_var, u * cur.inner_step, skip_row);
            row_checked = true;
          }
          // Per-row broadcasts that cannot be memory operands: one temporary per row.
          const bool a_row_bcast =
              per_row(a) && mem_op != 0 && a.shape == ColumnShape::kBroadcast;
          const bool b_row_bcast =
              per_row(b) && mem_op != 1 && b.shape == ColumnShape::kBroadcast;
          if (a_row_bcast) {
            load_broadcast(ta, a.dtype,
                           rsi + static_cast<std::int32_t>(r * a.row_coef * a.elem_bytes + u * cur.da));
          }
          if (b_row_bcast) {
            load_broadcast(tb, b.dtype,
                           rdi + static_cast<std::int32_t>(r * b.row_coef * b.elem_bytes + u * cur.db));
          }
          for (std::int64_t v = v0; v < v0 + nvg; ++v) {
            // Each operand: a register, or (at most one) memory operand.
            auto operand = [&](const AccessInfo& x, int which, int shared_base, bool row_bcast,
                               int temp, const Reg64& ptr_reg, std::int64_t step_disp,
                               std::optional<Address>* m) -> int {
              if (!per_row(x)) {
                if (mem_shared == which) {
                  const VecRef ref = ref_of(x, 0, v, step_disp, ptr_reg);
                  if (ref.count == vl) {
                    m->emplace(ptr[lane_addr(ref, 0, x.elem_bytes)]);
                    return -1;
                  }
                }
                return x.shape == ColumnShape::kBroadcast ? shared_base
                                                          : shared_base + static_cast<int>(v - v0);
              }
              if (row_bcast) return temp;
              const VecRef ref = ref_of(x, r, v, step_disp, ptr_reg);
              if (mem_op == which) {
                if (x.shape == ColumnShape::kBroadcast) {
                  m->emplace(ptr_b[lane_addr(ref, 0, x.elem_bytes)]);
                  return -1;
                }
                if (ref.count == vl) {
                  m->emplace(ptr[lane_addr(ref, 0, x.elem_bytes)]);
                  return -1;
                }
              }
              load_vector(temp, x.dtype, ref);
              return temp;
            };
            std::optional<Address> am, bm;
            const int ar = operand(a, 0, shared_a, a_row_bcast, ta, rsi, u * cur.da, &am);
            const int br = operand(b, 1, shared_b, b_row_bcast, tb, rdi, u * cur.db, &bm);
            const int accr = acc_reg(r, v);
            if (ar < 0) {
              fma(accr, vreg(br), *am);
            } else if (br < 0) {
              fma(accr, vreg(ar), *bm);
            } else {
              fma(accr, vreg(ar), vreg(br));
            }
          }
          if (row_checked) L(skip_row);
        }
        if (any_guard) L(skip);
      };

      if (!start.empty) emit_reduce_levels(t, a, b, nrg * nvg, &cur, k_step);

      std::vector<TileStore> stores;
      for (std::int64_t r = r0; r < r0 + nrg; ++r) {
        for (std::int64_t v = v0; v < v0 + nvg; ++v) {
          stores.push_back({acc_reg(r, v), ref_of(c, r, v, 0, r8)});
        }
      }
      emit_tile_stores(t, c, tail == vl, vg * vl, stores, ta, tb);
    }
  }
  release_reduce_counters(t);
  k1_count_ = -1;
}

// A line written in parts by non-temporal stores holds a write-combining buffer (one of the
// core's line fill buffers, which the loads use too) until its last part arrives, and a
// buffer the core needs back first goes out as a partial write, a read-modify-write of the
// line in memory. Where a tile's column groups are narrower than a line (AVX2's ymm vectors
// are half of one, as are a 16-bit output's zmm), each row's line waits for the next group
// while this one runs over the other rows. AVX2 code of 7x7 depthwise input gradients,
// 16-channel rows in groups of one vector (N x W x W x 96, f32, two threads on the AMX Xeon),
// streamed at 18-22 GFLOP/s over 56, 28 and 14 rows and ran 4.8-5.6x faster with plain stores;
// over 8 rows 1.9x, over 4 rows 1.05x. Two rows (MobileNetV2's 3x3/2 residue tiles, 16-bit
// outputs in groups of half a line) ran 1.02-1.17x faster streamed. So a tile streams groups
// narrower than a line over at most this many rows.
constexpr std::int64_t kPartLineRows = 2;

bool Emitter::streams_whole_lines(const ir::Tile& t, const AccessInfo& c, std::int64_t group_cols) {
  return group_cols >= t.cols || (group_cols * c.elem_bytes) % cpu::CpuInfo::kCacheLineBytes == 0 ||
         t.rows <= kPartLineRows;
}

void Emitter::emit_tile_stores(const ir::Tile& t, const AccessInfo& c, bool whole_vectors,
                               std::int64_t group_cols, const std::vector<TileStore>& stores,
                               int t1, int t2) {
  auto store_all = [&](bool nontemporal) {
    for (const TileStore& s : stores) {
      if (nontemporal) {
        store_vector_nontemporal(s.acc, c.dtype, s.ref, t1, t2);
      } else {
        store_vector(s.acc, c.dtype, s.ref, t1, t2);
      }
    }
  };
  if (!t.stream || !whole_vectors || c.shape != ColumnShape::kContiguous ||
      !streams_whole_lines(t, c, group_cols)) {
    store_all(false);
    return;
  }
  // Streamed only from a line-aligned start (the pass checked that the rows and vectors then
  // cover whole lines); the caller's pointer decides at run time, since a non-temporal store
  // to a misaligned address faults.
  Label plain, done;
  test(r8.cvt8(), cpu::CpuInfo::kCacheLineBytes - 1);
  jnz(plain, T_NEAR);
  store_all(true);
  jmp(done, T_NEAR);
  L(plain);
  store_all(false);
  L(done);
  streamed_ = true;
}

}  // namespace convjit::codegen::x86
