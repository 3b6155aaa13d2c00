// The reduction loops of a tile, shared by the FMA and the paired (vdpbf16ps) tile emitters:
// counters in registers for the innermost levels (stack slots beyond), the a and b pointers
// (rsi, rdi) bumped per level, the innermost loop unrolled with its copies folded into
// displacements.
#include <array>
#include <cstdint>

#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

namespace {

// Reduce-loop counters, innermost first (they get registers before outer levels do).
constexpr std::array<int, 7> kCounterRegs = {Operand::RBX, Operand::R9,  Operand::R10,
                                             Operand::R11, Operand::R12, Operand::R13,
                                             Operand::R14};

}  // namespace

void Emitter::bind_reduce_counters(const ir::Tile& t) {
  const std::size_t depth = t.reduce.size();
  for (std::size_t i = 0; i < depth; ++i) {
    const std::size_t from_inner = depth - 1 - i;
    if (from_inner < kCounterRegs.size()) {
      var_reg_[static_cast<std::size_t>(t.reduce[i].var)] = kCounterRegs[from_inner];
    }
  }
}

void Emitter::release_reduce_counters(const ir::Tile& t) {
  for (const ir::ReduceLoop& r : t.reduce) var_reg_[static_cast<std::size_t>(r.var)] = -1;
}

Emitter::ReduceStart Emitter::reduce_start(const ir::Tile& t, const AccessInfo& a,
                                           const AccessInfo& b) const {
  ReduceStart s;
  s.zeroed = {t.row_var, t.col_var};
  for (const ir::ReduceLoop& r : t.reduce) {
    s.empty = s.empty || r.end <= r.begin;
    s.a_elems += a.offset.coef_of(r.var) * r.begin;
    s.b_elems += b.offset.coef_of(r.var) * r.begin;
    s.zeroed.push_back(r.var);
  }
  return s;
}

void Emitter::emit_reduce_levels(const ir::Tile& t, const AccessInfo& a, const AccessInfo& b,
                                 std::int64_t accumulators, ReduceCursor* cur,
                                 const std::function<void(std::int64_t)>& k_step) {
  const std::size_t depth = t.reduce.size();
  std::function<void(std::size_t)> level = [&](std::size_t i) {
    if (i == depth) {
      k_step(0);
      return;
    }
    const ir::ReduceLoop& rl = t.reduce[i];
    const std::int64_t trip = (rl.end - rl.begin + rl.step - 1) / rl.step;
    const std::int64_t sa = a.offset.coef_of(rl.var) * rl.step * a.elem_bytes;
    const std::int64_t sb = b.offset.coef_of(rl.var) * rl.step * b.elem_bytes;
    const int reg = var_reg_[static_cast<std::size_t>(rl.var)];
    auto set_var = [&](std::int64_t value) {
      if (reg >= 0) {
        mov(Reg64(reg), static_cast<std::uint64_t>(value));
      } else {
        mov_imm(slot(rl.var), value);
      }
    };
    auto advance_and_branch = [&](std::int64_t by, std::int64_t end, Label& head) {
      if (reg >= 0) {
        add(Reg64(reg), static_cast<std::uint32_t>(by));
        cmp(Reg64(reg), static_cast<std::uint32_t>(end));
      } else {
        add(slot(rl.var), static_cast<std::uint32_t>(by));
        cmp(slot(rl.var), static_cast<std::uint32_t>(end));
      }
      jl(head, T_NEAR);
    };
    set_var(rl.begin);
    if (i + 1 < depth) {
      if (trip == 1) {
        level(i + 1);
        return;
      }
      Label head;
      align(16);
      L(head);
      level(i + 1);
      add_imm(rsi, sa);
      add_imm(rdi, sb);
      advance_and_branch(rl.step, rl.begin + trip * rl.step, head);
      add_imm(rsi, -sa * trip);
      add_imm(rdi, -sb * trip);
      return;
    }
    // Innermost: unrolled copies fold their offsets into displacements.
    cur->inner_var = rl.var;
    cur->inner_step = rl.step;
    cur->da = sa;
    cur->db = sb;
    if (trip <= kFullUnrollTrip) {
      cur->unroll = trip;
      for (std::int64_t u = 0; u < trip; ++u) k_step(u);
      return;
    }
    const std::int64_t unroll = accumulators <= 8 ? 8 : 4;
    cur->unroll = unroll;
    const std::int64_t main = trip / unroll;
    Label head;
    // The hot loop's head on a fetch-block boundary: the padding runs once, before entry.
    align(32);
    L(head);
    for (std::int64_t u = 0; u < unroll; ++u) k_step(u);
    add_imm(rsi, sa * unroll);
    add_imm(rdi, sb * unroll);
    advance_and_branch(rl.step * unroll, rl.begin + main * unroll * rl.step, head);
    for (std::int64_t u = 0; u < trip - main * unroll; ++u) k_step(u);
    add_imm(rsi, -sa * unroll * main);
    add_imm(rdi, -sb * unroll * main);
  };
  level(0);
}

// Tiles marked by prefetch_streamed_rows (which says why): one prefetch per row of the next
// row group per pass of the unrolled body, spread over its copies, for the per-row broadcast
// operand whose rows lie in different lines and advance within a line per reduction point.
void Emitter::emit_next_rows_prefetch(const ir::Tile& t, const AccessInfo& x, const Reg64& ptr_reg,
                                      std::int64_t step_bytes, std::int64_t r0, std::int64_t rows,
                                      const ReduceCursor& cur, std::int64_t u) {
  constexpr std::int64_t kLineBytes = cpu::CpuInfo::kCacheLineBytes;
  const std::int64_t row_bytes = x.row_coef * x.elem_bytes;
  if (!t.prefetch_next_rows || x.shape != ColumnShape::kBroadcast || row_bytes < kLineBytes ||
      step_bytes <= 0 || step_bytes >= kLineBytes || cur.unroll < 1) {
    return;
  }
  for (std::int64_t r = r0; r < r0 + rows; ++r) {
    if (r % cur.unroll != u) continue;
    const std::int64_t disp = (r + t.rows) * row_bytes + u * step_bytes;
    if (disp > INT32_MAX) return;
    prefetcht0(ptr[ptr_reg + static_cast<std::int32_t>(disp)]);
  }
}

// Tiles marked with a next block (prefetch_next_blocks says why): at reduction point `u` of
// the unrolled body, a prefetch per line of the `bytes` bytes from `first_byte` that operand
// x (at ptr_reg) reads at the same point of the next block, `distance` elements further. (A
// broadcast's rows that cross into a second line leave that line to the tile whose rows
// begin in it.)
void Emitter::emit_next_block_prefetch(const AccessInfo& x, std::int64_t distance,
                                       const Reg64& ptr_reg, std::int64_t step_bytes,
                                       std::int64_t u, std::int64_t first_byte,
                                       std::int64_t bytes) {
  constexpr std::int64_t kLineBytes = cpu::CpuInfo::kCacheLineBytes;
  if (distance == 0) return;
  const std::int64_t base = distance * x.elem_bytes + u * step_bytes + first_byte;
  for (std::int64_t k = 0; k < bytes; k += kLineBytes) {
    if (!fits_int32(base + k)) return;
    prefetcht0(ptr[ptr_reg + static_cast<std::int32_t>(base + k)]);
  }
}

}  // namespace convjit::codegen::x86
