// The paired bfloat16 tile on AMX (CpuInfo::has_amx_bf16). A paired tile's operands are
// already in the layouts tdpbf16ps reads: a's rows (dy's pixels) hold consecutive pairs of
// the innermost reduction (output channels, contiguous), so 16 of them are one row of a
// 64-byte row tile, rows a.row_coef apart; b's interleaved pairs are 16 columns of 4 bytes per
// pair, pairs a constant stride apart: rows of a column tile. So the tile runs as blocks of
// up to 16 rows x 16 columns of f32 accumulators in tile registers, each reduction step one
// row tile per row block, one column tile per column block and one tdpbf16ps per pair of
// them. The accumulators go through the frame (tilestored) into vector registers and leave
// like any other tile's: read back from c first where the tile accumulates, rounded to c's
// dtype, streamed where the tile streams.
//
// Eight tile registers: a block group of mt x nt accumulators beside mt row tiles and nt
// column tiles (2x2, 1x3 or 3x1); larger tiles run group after group, each over the whole
// reduction. A group's shapes (rows of its last row block, columns of its last column block,
// pairs per step) are its tile configuration, loaded at its start where the registers hold
// another; a reduction whose pairs have no large divisor takes steps of 16 and a tail pass
// of the rest under a second configuration (tail_pairs); a function that ran tiles ends with
// tilerelease, so none leaves the tile state in use.
#include <algorithm>
#include <array>

#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

namespace {

constexpr std::int64_t kTileRows = 16;
constexpr std::int64_t kTileColumns = 16;     // f32 accumulators per row
constexpr std::int64_t kTileRowBytes = 64;
constexpr std::int64_t kMaxPairsPerStep = 16;  // 64 bytes of pairs per row of a row tile

// Cycles of storing a group's accumulators to the frame, loading the tail's configuration and
// the accumulators back (about 175 for the ldtilecfg, measured, and a few tile moves): what a
// tail pass costs once per group.
constexpr std::int64_t kTailPassCycles = 300;
constexpr std::int64_t kStepCycles = 64;  // a 2x2 group's four tdpbf16ps, issue to issue

// The pairs each reduction step takes: the largest divisor of the innermost loop's pairs
// that one row tile holds, so every step is whole (a step of fewer pairs costs the same
// tdpbf16ps as a full one).
std::int64_t pairs_per_step(std::int64_t pairs) {
  for (std::int64_t k = std::min(pairs, kMaxPairsPerStep); k > 1; --k) {
    if (pairs % k == 0) return k;
  }
  return 1;
}

// Steps of 16 pairs and one tail step of the rest, where that saves more steps over the
// `outer` iterations of the loops around the innermost than the tail pass costs: a prime
// count of pairs (31: one pair a step) or one with only small divisors (111: three) would
// otherwise run its tdpbf16ps a few pairs deep. The tail needs its own configuration, and
// loading one zeroes the tile registers, so the tail runs once per group after the main
// steps, over all the outer iterations again, on accumulators stored and reloaded around it.
std::int64_t tail_pairs(std::int64_t pairs, std::int64_t outer) {
  const std::int64_t whole = pairs / kMaxPairsPerStep, tail = pairs % kMaxPairsPerStep;
  if (whole == 0 || tail == 0) return 0;
  const std::int64_t saved = pairs / pairs_per_step(pairs) - (whole + 1);
  return saved * outer * kStepCycles > kTailPassCycles ? tail : 0;
}

// Block groups whose accumulator, row and column tiles fit the eight registers.
struct Group {
  std::int64_t row_blocks;
  std::int64_t col_blocks;
};
Group group_for(std::int64_t row_blocks, std::int64_t col_blocks) {
  if (row_blocks >= 2 && col_blocks >= 2) return {2, 2};
  if (row_blocks == 1) return {1, std::min<std::int64_t>(col_blocks, 3)};
  return {std::min<std::int64_t>(row_blocks, 3), 1};
}

}  // namespace

bool Emitter::emit_amx_tile(const ir::Tile& t, const AccessInfo& a, const AccessInfo& b,
                            const AccessInfo& c) {
  if (!target_.has_amx_bf16 || t.reduce.empty()) return false;
  const ir::ReduceLoop& inner = t.reduce.back();
  // a: a row's pairs contiguous along the innermost loop; b: 16 columns of interleaved pairs,
  // 4 bytes apart, one pair per step of that loop; rows of neither depend on the column.
  if (inner.step != 1 || inner.end <= inner.begin || a.offset.coef_of(inner.var) != 2 ||
      a.col_coef != 0 || b.shape != ColumnShape::kStrided || b.col_coef != 2 ||
      b.row_coef != 0 || a.elem_bytes != 2 || b.elem_bytes != 2) {
    return false;
  }
  for (const ir::Guard& g : t.guards) {
    if (g.expr.numer.coef_of(t.row_var) != 0 || g.expr.numer.coef_of(inner.var) != 0) {
      return false;
    }
  }
  const std::int64_t a_stride = a.row_coef * a.elem_bytes;
  const std::int64_t b_stride = b.offset.coef_of(inner.var) * b.elem_bytes;
  std::int64_t outer = 1;
  for (std::size_t i = 0; i + 1 < t.reduce.size(); ++i) {
    const ir::ReduceLoop& r = t.reduce[i];
    outer *= std::max<std::int64_t>(0, (r.end - r.begin + r.step - 1) / r.step);
  }
  const std::int64_t pairs = inner.end - inner.begin;
  const std::int64_t tail = tail_pairs(pairs, outer);
  const std::int64_t kp = tail > 0 ? kMaxPairsPerStep : pairs_per_step(pairs);
  // Row blocks and steps are displacements: they must stay 32-bit.
  if (!fits_int32(a_stride * t.rows) || !fits_int32(b_stride * kp * 8)) return false;

  // The reduction in steps of kp pairs: the reduce-level walker then bumps the pointers by a
  // step's bytes and hands each step's offset to k_step. A tail: one step of its pairs after
  // the whole steps, in a pass of its own.
  ir::Tile steps = t;
  steps.reduce.back().step = kp;
  steps.reduce.back().end = inner.end - tail;
  ir::Tile tail_steps = t;
  tail_steps.reduce.back().begin = inner.end - tail;
  tail_steps.reduce.back().step = std::max<std::int64_t>(tail, 1);

  const std::int64_t vl = kTileColumns;
  const std::int64_t row_blocks = (t.rows + kTileRows - 1) / kTileRows;
  const std::int64_t col_blocks = (t.cols + vl - 1) / vl;
  const Group group = group_for(row_blocks, col_blocks);
  const int nregs = target_.vector_registers;
  const int t1 = nregs - 1;
  const int t2 = nregs - 2;

  bind_reduce_counters(steps);
  const ReduceStart start = reduce_start(steps, a, b);
  const ReduceStart tail_start = reduce_start(tail_steps, a, b);
  for (std::int64_t cb0 = 0; cb0 < col_blocks; cb0 += group.col_blocks) {
    const std::int64_t ncb = std::min(group.col_blocks, col_blocks - cb0);
    for (std::int64_t rb0 = 0; rb0 < row_blocks; rb0 += group.row_blocks) {
      const std::int64_t nrb = std::min(group.row_blocks, row_blocks - rb0);
      auto rows_of = [&](std::int64_t i) {
        return std::min(kTileRows, t.rows - (rb0 + i) * kTileRows);
      };
      auto cols_of = [&](std::int64_t j) { return std::min(vl, t.cols - (cb0 + j) * vl); };
      auto acc_tile = [&](std::int64_t i, std::int64_t j) {
        return static_cast<int>(i * ncb + j);
      };
      auto row_tile = [&](std::int64_t i) { return static_cast<int>(nrb * ncb + i); };
      auto col_tile = [&](std::int64_t j) { return static_cast<int>(nrb * ncb + nrb + j); };

      // The configuration for steps of `step_pairs`: palette 1, then per tile its bytes per
      // row and its rows; loaded unless the registers hold it already (the previous tile's,
      // in most loops).
      auto configure = [&](std::int64_t step_pairs) {
        std::array<std::uint8_t, 64> config{};
        config[0] = 1;
        auto shape = [&](int tile, std::int64_t rows, std::int64_t bytes_per_row) {
          config[16 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row & 0xFF);
          config[17 + 2 * tile] = static_cast<std::uint8_t>(bytes_per_row >> 8);
          config[48 + tile] = static_cast<std::uint8_t>(rows);
        };
        for (std::int64_t i = 0; i < nrb; ++i) {
          for (std::int64_t j = 0; j < ncb; ++j) shape(acc_tile(i, j), rows_of(i), 4 * cols_of(j));
          shape(row_tile(i), rows_of(i), 4 * step_pairs);
        }
        for (std::int64_t j = 0; j < ncb; ++j) shape(col_tile(j), step_pairs, 4 * cols_of(j));
        const int id =
            amx_config_ids_.emplace(config, static_cast<int>(amx_config_ids_.size()) + 1)
                .first->second;
        const auto cfg = static_cast<std::int32_t>(amx_config_offset_);
        const auto id_slot = dword[rsp + static_cast<std::int32_t>(amx_config_id_offset_)];
        Label loaded;
        cmp(id_slot, id);
        je(loaded, T_NEAR);
        for (int q = 0; q < 8; ++q) {
          std::uint64_t word = 0;
          for (int byte = 7; byte >= 0; --byte) word = (word << 8) | config[8 * q + byte];
          mov(rax, word);
          mov(qword[rsp + cfg + 8 * q], rax);
        }
        ldtilecfg(ptr[rsp + cfg]);
        mov(id_slot, id);
        L(loaded);
      };
      // The accumulators to or from the frame, one 1 KiB block each, rows 64 bytes apart.
      auto move_accumulators = [&](bool store) {
        mov(rdx, static_cast<std::uint64_t>(kTileRowBytes));
        for (std::int64_t i = 0; i < nrb; ++i) {
          for (std::int64_t j = 0; j < ncb; ++j) {
            const auto at = static_cast<std::int32_t>(amx_accumulator_offset_ +
                                                      acc_tile(i, j) * kTileRows * kTileRowBytes);
            if (store) {
              tilestored(ptr[rsp + rdx + at], Tmm(acc_tile(i, j)));
            } else {
              tileloadd(Tmm(acc_tile(i, j)), ptr[rsp + rdx + at]);
            }
          }
        }
      };
      configure(kp);
      amx_used_ = true;
      for (std::int64_t i = 0; i < nrb; ++i) {
        for (std::int64_t j = 0; j < ncb; ++j) tilezero(Tmm(acc_tile(i, j)));
      }

      k1_count_ = -1;
      ReduceCursor cur;
      auto k_step = [&](std::int64_t u) {
        Label skip;
        bool any_guard = false;
        for (const ir::Guard& g : t.guards) {
          emit_guard_check(g, -1, 0, cur.inner_var, u * cur.inner_step, skip);
          any_guard = true;
        }
        // The strides ride in the index register (the guards clobber rax and rdx).
        mov(rax, static_cast<std::uint64_t>(a_stride));
        mov(rdx, static_cast<std::uint64_t>(b_stride));
        for (std::int64_t j = 0; j < ncb; ++j) {
          const auto disp = static_cast<std::int32_t>(u * cur.db + (cb0 + j) * kTileRowBytes);
          tileloadd(Tmm(col_tile(j)), ptr[rdi + rdx + disp]);
        }
        for (std::int64_t i = 0; i < nrb; ++i) {
          const auto disp =
              static_cast<std::int32_t>(u * cur.da + (rb0 + i) * kTileRows * a_stride);
          tileloadd(Tmm(row_tile(i)), ptr[rsi + rax + disp]);
          for (std::int64_t j = 0; j < ncb; ++j) {
            tdpbf16ps(Tmm(acc_tile(i, j)), Tmm(row_tile(i)), Tmm(col_tile(j)));
          }
        }
        if (any_guard) L(skip);
      };
      if (!start.empty) {
        emit_base_pointer(rsi, a, start.zeroed, start.a_elems);
        emit_base_pointer(rdi, b, start.zeroed, start.b_elems);
        emit_reduce_levels(steps, a, b, nrb * ncb * kTileRows, &cur, k_step);
      }
      if (tail > 0 && !tail_start.empty) {
        move_accumulators(true);
        configure(tail);
        move_accumulators(false);
        emit_base_pointer(rsi, a, tail_start.zeroed, tail_start.a_elems);
        emit_base_pointer(rdi, b, tail_start.zeroed, tail_start.b_elems);
        emit_reduce_levels(tail_steps, a, b, nrb * ncb * kTileRows, &cur, k_step);
      }
      move_accumulators(true);

      // From the frame into vector registers, as many rows at a time as leave the store
      // temporaries free, then out like any tile's accumulators.
      emit_base_pointer(r8, c, {t.row_var, t.col_var}, 0);
      const int tail = static_cast<int>(cols_of(ncb - 1));
      const std::int64_t rows_per_batch = std::max<std::int64_t>(1, (nregs - 2) / ncb);
      const std::int64_t group_rows = (nrb - 1) * kTileRows + rows_of(nrb - 1);
      for (std::int64_t r0 = 0; r0 < group_rows; r0 += rows_per_batch) {
        std::vector<TileStore> stores;
        int acc = 0;
        for (std::int64_t r = r0; r < std::min(group_rows, r0 + rows_per_batch); ++r) {
          const std::int64_t row = rb0 * kTileRows + r;
          for (std::int64_t j = 0; j < ncb; ++j) {
            const int count = static_cast<int>(cols_of(j));
            VecRef ref{r8, 0, 1, count};
            ref.disp = (row * c.row_coef + (cb0 + j) * vl * c.col_coef) * c.elem_bytes;
            ref.lane_stride = c.shape == ColumnShape::kStrided ? c.col_coef : 1;
            const auto from = static_cast<std::int32_t>(
                amx_accumulator_offset_ +
                acc_tile(r / kTileRows, j) * kTileRows * kTileRowBytes +
                (r % kTileRows) * kTileRowBytes);
            if (t.accumulate) {
              load_vector(acc, c.dtype, ref);
              vaddps(Zmm(acc), Zmm(acc), ptr[rsp + from]);
            } else {
              vmovups(Zmm(acc), ptr[rsp + from]);
            }
            stores.push_back({acc, ref});
            ++acc;
          }
        }
        // The stores of a partial last column block read k1 as its mask.
        if (tail < vl) set_mask(tail);
        emit_tile_stores(t, c, tail == vl, group.col_blocks * vl, stores, t1, t2);
      }
    }
  }
  release_reduce_counters(steps);
  k1_count_ = -1;
  return true;
}

}  // namespace convjit::codegen::x86
