// Transposing copies: two nested loops around one Store writing f32 (from f32, or widening
// bfloat16 or half as the rows load), or around the two Stores of a pair of 16-bit elements
// moved as one dword (pair_reduction's bfloat16 packed filter), whose destination is contiguous
// along the inner loop and whose source is contiguous along the outer one (NCHW's dy copied
// channels-last, the channels-last dx copied back to NCHW). Lane by lane each destination
// vector took eight single-element loads (gather_f32), and these copies were a fifth of an
// NCHW 1x1/2 input gradient's time. Here 8x8 blocks go through registers instead: each source
// row is two 128-bit loads, a 4x4 transpose inside each 128-bit lane (unpck ps, then pd)
// turns eight half rows into four whole destination rows, and every destination row is one
// vector store (non-temporal where the Store streams, 16 columns at a time so each row's line
// is written whole). Only ymm registers are used, so the same code serves AVX2 and AVX-512.
#include <cstdlib>

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
  if (inner == nullptr || inner->step != 1) return false;
  const std::int64_t rows = outer.trip_count(), cols = inner->trip_count();
  if (rows < kBlock || cols < kBlock) return false;
  // The copy in 32-bit destination elements: dst_row and src_col are the destination's step
  // along its rows (outer) and the source's along the destination's columns (inner), in
  // elements of 4 and `se` bytes; the source is contiguous along the rows.
  AccessInfo dst, src;
  std::int64_t dst_row = 0, src_col = 0, dst_begin = 0, src_begin = 0;
  int se = kF32;
  bool widening = false, stream = false;
  if (inner->body.size() == 1) {
    const auto* store = std::get_if<ir::Store>(&inner->body.front().node);
    if (store == nullptr || !store->has_src || store->accumulate) return false;
    if (!analyze_access(nest_, store->dst, -1, inner->var, cols, &dst) ||
        !analyze_access(nest_, store->src, -1, inner->var, cols, &src)) {
      return false;
    }
    dst_row = dst.offset.coef_of(outer.var);
    src_col = src.col_coef;
    widening = src.dtype == DType::kBFloat16 || src.dtype == DType::kHalf;
    if (dst.dtype != DType::kFloat32 || (src.dtype != DType::kFloat32 && !widening) ||
        dst.buffer == src.buffer || dst.col_coef != 1 || src.offset.coef_of(outer.var) != 1) {
      return false;
    }
    se = src.elem_bytes;  // 4, or 2 for a copy widening 16-bit elements
    dst_begin = outer.begin * dst_row + inner->begin;
    src_begin = outer.begin + inner->begin * src_col;
    stream = store->stream;
  } else {
    // Pairs of 16-bit elements (pair_reduction's packed filter): dst[.., 2c] and dst[.., 2c+1]
    // from two adjacent source elements, the pair two elements further per row. Each pair is
    // one dword on both sides, so the copy is a transpose of dwords.
    CopyPair pair;
    if (!analyze_copy_pair(*inner, &pair)) return false;
    const ir::Affine dst_gap = pair.d1.offset - pair.d0.offset;
    const ir::Affine src_gap = pair.s1.offset - pair.s0.offset;
    dst = pair.d0;
    src = pair.s0;
    const std::int64_t dst_row_elems = dst.offset.coef_of(outer.var);
    if (dst.elem_bytes != 2 || pair.d1.dtype != dst.dtype || src.dtype != dst.dtype ||
        pair.s1.dtype != dst.dtype || pair.d1.buffer != dst.buffer ||
        pair.s1.buffer != src.buffer || dst.buffer == src.buffer || !dst_gap.is_constant() ||
        dst_gap.constant != 1 || !src_gap.is_constant() || src_gap.constant != 1 ||
        dst.col_coef != 2 || pair.d1.col_coef != 2 || src.offset.coef_of(outer.var) != 2 ||
        src.col_coef != pair.s1.col_coef || src.col_coef % 2 != 0 || dst_row_elems % 2 != 0 ||
        pair.first->stream != pair.second->stream) {
      return false;
    }
    dst_row = dst_row_elems / 2;
    src_col = src.col_coef / 2;
    dst_begin = outer.begin * dst_row_elems + inner->begin * 2;
    src_begin = outer.begin * 2 + inner->begin * src.col_coef;
    stream = pair.first->stream;
  }
  // Every displacement within a 16-column block must stay 32-bit.
  if (dst_row == 0 || src_col == 0 ||
      !fits_int32(2 * kBlock * (std::llabs(dst_row) + std::llabs(src_col) + 1) * kF32)) {
    return false;
  }
  k1_count_ = -1;
  emit_base_pointer(r8, dst, {outer.var, inner->var}, dst_begin);
  emit_base_pointer(r9, src, {outer.var, inner->var}, src_begin);

  const auto row_of = [](int i) { return Ymm(i); };
  auto widen4 = [&](const Xmm& to, const Address& from) {
    if (src.dtype == DType::kHalf) {
      vcvtph2ps(to, from);
    } else {
      vpmovzxwd(to, from);
      vpslld(to, to, 16);  // bfloat16 is the high half of its f32
    }
  };
  // One element, widened where the source is 16-bit.
  auto element = [&](const RegExp& to, const RegExp& from) {
    if (widening) {
      widen_element(to, from, src.dtype);
    } else {
      copy_element(to, from, kF32);
    }
  };
  // Registers first..first+3 := destination rows 4h..4h+3, columns c..c+7 (c = col_off), from
  // source rows c..c+7 at rdi, elements 4h..4h+3 of each; ymm8-11 are temporaries.
  auto quarter = [&](int half, std::int64_t col_off, int first) {
    // x_k = [src row c+k, elements 4h..4h+3 | src row c+k+4, the same]
    for (int k = 0; k < 4; ++k) {
      const std::int64_t lo = ((col_off + k) * src_col + half * 4) * se;
      const std::int64_t hi = ((col_off + k + 4) * src_col + half * 4) * se;
      if (!widening) {
        vmovups(Xmm(first + k), ptr[rdi + static_cast<std::int32_t>(lo)]);
        vinsertf128(row_of(first + k), row_of(first + k), ptr[rdi + static_cast<std::int32_t>(hi)],
                    1);
        continue;
      }
      // Four 16-bit elements of each half row widened to f32 on the way in.
      widen4(Xmm(first + k), ptr[rdi + static_cast<std::int32_t>(lo)]);
      widen4(Xmm(8), ptr[rdi + static_cast<std::int32_t>(hi)]);
      vinsertf128(row_of(first + k), row_of(first + k), Xmm(8), 1);
    }
    vunpcklps(row_of(8), row_of(first), row_of(first + 1));
    vunpckhps(row_of(9), row_of(first), row_of(first + 1));
    vunpcklps(row_of(10), row_of(first + 2), row_of(first + 3));
    vunpckhps(row_of(11), row_of(first + 2), row_of(first + 3));
    vunpcklpd(row_of(first), row_of(8), row_of(10));
    vunpckhpd(row_of(first + 1), row_of(8), row_of(10));
    vunpcklpd(row_of(first + 2), row_of(9), row_of(11));
    vunpckhpd(row_of(first + 3), row_of(9), row_of(11));
  };
  auto row_addr = [&](std::int64_t row, std::int64_t col) {
    return ptr[rsi + static_cast<std::int32_t>((row * dst_row + col) * kF32)];
  };
  // An 8x8 block to rsi.
  auto block = [&] {
    for (int half = 0; half < 2; ++half) {
      quarter(half, 0, 0);
      for (int j = 0; j < 4; ++j) vmovups(row_addr(half * 4 + j, 0), row_of(j));
    }
  };
  // 8 rows x 16 columns, each row's 64 bytes stored past the caches back to back, so every
  // line is written whole at once.
  auto streamed_block = [&] {
    for (int half = 0; half < 2; ++half) {
      quarter(half, 0, 0);
      quarter(half, kBlock, 4);
      for (int j = 0; j < 4; ++j) {
        vmovntps(row_addr(half * 4 + j, 0), row_of(j));
        vmovntps(row_addr(half * 4 + j, kBlock), row_of(4 + j));
      }
    }
  };
  // Columns past the last whole block, for the eight rows of a block: element by element.
  const std::int64_t col_tail = cols % kBlock;
  auto tail_columns = [&] {
    for (std::int64_t j = 0; j < kBlock; ++j) {
      for (std::int64_t k = 0; k < col_tail; ++k) {
        element(rsi + static_cast<std::int32_t>((j * dst_row + k) * kF32),
                rdi + static_cast<std::int32_t>((k * src_col + j) * se));
      }
    }
  };

  const std::int64_t row_blocks = rows / kBlock, row_tail = rows % kBlock;
  auto all_rows = [&](bool streamed) {
    Label rows_head, cols_head;
    mov(r10, static_cast<std::uint64_t>(row_blocks));
    L(rows_head);
    mov(rsi, r8);
    mov(rdi, r9);
    const std::int64_t width = streamed ? 2 * kBlock : kBlock;
    mov(r11, static_cast<std::uint64_t>(cols / width));
    L(cols_head);
    if (streamed) {
      streamed_block();
    } else {
      block();
    }
    add_imm(rsi, width * kF32);
    add_imm(rdi, width * src_col * se);
    dec(r11);
    jnz(cols_head, T_NEAR);
    if (streamed && cols % width >= kBlock) {
      block();
      add_imm(rsi, kBlock * kF32);
      add_imm(rdi, kBlock * src_col * se);
    }
    tail_columns();
    add_imm(r8, kBlock * dst_row * kF32);
    add_imm(r9, kBlock * se);
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
        element(rsi + static_cast<std::int32_t>(j * dst_row * kF32),
                rdi + static_cast<std::int32_t>(j * se));
      }
      add_imm(rsi, kF32);
      add_imm(rdi, src_col * se);
      dec(r11);
      jnz(tail_head, T_NEAR);
    }
  };
  // Streamed when the pass allows it and every destination row of a block starts a cache line
  // whenever the first does (checked at run time: vmovntps faults off its alignment).
  const bool line_rows = (dst_row * kF32) % cpu::CpuInfo::kCacheLineBytes == 0;
  if (stream && line_rows && cols >= 2 * kBlock) {
    Label plain, done;
    test(r8.cvt8(), cpu::CpuInfo::kCacheLineBytes - 1);
    jnz(plain, T_NEAR);
    all_rows(true);
    jmp(done, T_NEAR);
    L(plain);
    all_rows(false);
    L(done);
    streamed_ = true;
  } else {
    all_rows(false);
  }
  return true;
}

}  // namespace convjit::codegen::x86
