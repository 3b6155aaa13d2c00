// Transposing copies: two nested loops around one f32 Store whose destination is contiguous
// along the inner loop and whose source is contiguous along the outer one (NCHW's dy copied
// channels-last, the channels-last dx copied back to NCHW). Lane by lane each destination
// vector took eight single-element loads (gather_f32), and these copies were a fifth of an
// NCHW 1x1/2 input gradient's time. Here 8x8 blocks go through registers instead: each source
// row is two 128-bit loads, a 4x4 transpose inside each 128-bit lane (unpck ps, then pd)
// turns eight half rows into four whole destination rows, and every destination row is one
// vector store. Only ymm registers are used, so the same code serves AVX2 and AVX-512.
#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

namespace {

constexpr std::int64_t kBlock = 8;  // 8x8 f32 blocks: one ymm per row
constexpr int kF32 = 4;

}  // namespace

bool Emitter::try_emit_transpose_loop(const ir::Loop& outer) {
  if (outer.body.size() != 1 || outer.step != 1) return false;
  const auto* inner = std::get_if<ir::Loop>(&outer.body.front().node);
  if (inner == nullptr || inner->body.size() != 1 || inner->step != 1) return false;
  const auto* store = std::get_if<ir::Store>(&inner->body.front().node);
  if (store == nullptr || !store->has_src || store->accumulate) return false;
  const std::int64_t rows = outer.trip_count(), cols = inner->trip_count();
  if (rows < kBlock || cols < kBlock) return false;
  AccessInfo dst, src;
  if (!analyze_access(nest_, store->dst, -1, inner->var, cols, &dst) ||
      !analyze_access(nest_, store->src, -1, inner->var, cols, &src)) {
    return false;
  }
  // Element steps: the destination's along its rows (outer) and the source's along the
  // destination's columns (inner).
  const std::int64_t dst_row = dst.offset.coef_of(outer.var);
  const std::int64_t src_col = src.col_coef;
  if (dst.dtype != DType::kFloat32 || src.dtype != DType::kFloat32 || dst.buffer == src.buffer ||
      dst.col_coef != 1 || src.offset.coef_of(outer.var) != 1 || dst_row == 0 || src_col == 0 ||
      !fits_int32(kBlock * dst_row * kF32) || !fits_int32(kBlock * src_col * kF32)) {
    return false;
  }
  k1_count_ = -1;
  emit_base_pointer(r8, dst, {outer.var, inner->var}, outer.begin * dst_row + inner->begin);
  emit_base_pointer(r9, src, {outer.var, inner->var}, outer.begin + inner->begin * src_col);

  const auto row_of = [](int i) { return Ymm(i); };
  // Destination rows a0..a0+7, columns b0..b0+7, from source rows b0..b0+7 (rdi) of eight
  // elements a0..a0+7 each, to rsi.
  auto block = [&] {
    for (int half = 0; half < 2; ++half) {
      // x_k = [src row k, elements 4h..4h+3 | src row k+4, the same]
      for (int k = 0; k < 4; ++k) {
        const std::int64_t lo = (k * src_col) * kF32 + half * 16;
        const std::int64_t hi = ((k + 4) * src_col) * kF32 + half * 16;
        vmovups(Xmm(k), ptr[rdi + static_cast<std::int32_t>(lo)]);
        vinsertf128(row_of(k), row_of(k), ptr[rdi + static_cast<std::int32_t>(hi)], 1);
      }
      vunpcklps(row_of(8), row_of(0), row_of(1));
      vunpckhps(row_of(9), row_of(0), row_of(1));
      vunpcklps(row_of(10), row_of(2), row_of(3));
      vunpckhps(row_of(11), row_of(2), row_of(3));
      vunpcklpd(row_of(0), row_of(8), row_of(10));
      vunpckhpd(row_of(1), row_of(8), row_of(10));
      vunpcklpd(row_of(2), row_of(9), row_of(11));
      vunpckhpd(row_of(3), row_of(9), row_of(11));
      // y_j = destination row 4h + j, columns b0..b0+7.
      for (int j = 0; j < 4; ++j) {
        vmovups(ptr[rsi + static_cast<std::int32_t>((half * 4 + j) * dst_row * kF32)], row_of(j));
      }
    }
  };
  // Columns past the last whole block, for the eight rows of a block: element by element.
  const std::int64_t col_blocks = cols / kBlock, col_tail = cols % kBlock;
  auto tail_columns = [&](std::int64_t row_count) {
    for (std::int64_t j = 0; j < row_count; ++j) {
      for (std::int64_t k = 0; k < col_tail; ++k) {
        copy_element(rsi + static_cast<std::int32_t>((j * dst_row + k) * kF32),
                     rdi + static_cast<std::int32_t>((k * src_col + j) * kF32), kF32);
      }
    }
  };

  const std::int64_t row_blocks = rows / kBlock, row_tail = rows % kBlock;
  Label rows_head, cols_head;
  mov(r10, static_cast<std::uint64_t>(row_blocks));
  L(rows_head);
  mov(rsi, r8);
  mov(rdi, r9);
  mov(r11, static_cast<std::uint64_t>(col_blocks));
  L(cols_head);
  block();
  add_imm(rsi, kBlock * kF32);
  add_imm(rdi, kBlock * src_col * kF32);
  dec(r11);
  jnz(cols_head, T_NEAR);
  tail_columns(kBlock);
  add_imm(r8, kBlock * dst_row * kF32);
  add_imm(r9, kBlock * kF32);
  dec(r10);
  jnz(rows_head, T_NEAR);
  if (row_tail > 0) {
    // The last rows, element by element along their columns.
    Label tail_head;
    mov(rsi, r8);
    mov(rdi, r9);
    mov(r11, static_cast<std::uint64_t>(cols));
    L(tail_head);
    for (std::int64_t j = 0; j < row_tail; ++j) {
      copy_element(rsi + static_cast<std::int32_t>(j * dst_row * kF32),
                   rdi + static_cast<std::int32_t>(j * kF32), kF32);
    }
    add_imm(rsi, kF32);
    add_imm(rdi, src_col * kF32);
    dec(r11);
    jnz(tail_head, T_NEAR);
  }
  return true;
}

}  // namespace convjit::codegen::x86
