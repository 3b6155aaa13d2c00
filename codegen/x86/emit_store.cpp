// Store nodes (zero fills, filter packing, partial-sum reduction): vectorized along a loop
// whose only statement is the store and along which the destination is contiguous; one
// element at a time otherwise.
#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

bool Emitter::try_emit_vector_store_loop(const ir::Loop& loop) {
  if (loop.body.size() != 1 || loop.step != 1 || loop.trip_count() < 2) return false;
  const auto* store = std::get_if<ir::Store>(&loop.body.front().node);
  if (store == nullptr) return false;
  const std::int64_t trip = loop.trip_count();
  AccessInfo dst, src;
  if (!analyze_access(nest_, store->dst, -1, loop.var, trip, &dst)) return false;
  // A destination that stays put would need the iterations in order (accumulate).
  if (dst.shape == ColumnShape::kBroadcast) return false;
  const bool has_src = store->has_src;
  if (has_src && !analyze_access(nest_, store->src, -1, loop.var, trip, &src)) return false;
  // Strided lanes (a transposing pack) go through the bounce buffer; their displacements
  // must stay 32-bit.
  constexpr std::int64_t kMaxLanes = 16;
  if (!fits_int32(dst.col_coef * kMaxLanes * dst.elem_bytes) ||
      (has_src && !fits_int32(src.col_coef * kMaxLanes * src.elem_bytes))) {
    return false;
  }
  const bool dst_wide = dst.dtype == DType::kFloat64;
  const bool src_wide = has_src && src.dtype == DType::kFloat64;
  // Vector conversion between f64 and the 32/16-bit types is left to the scalar path.
  if (has_src && dst_wide != src_wide) return false;
  const DType acc = dst_wide ? DType::kFloat64 : DType::kFloat32;
  const std::int64_t vl = lanes(acc);

  k1_count_ = -1;
  emit_base_pointer(r8, dst, {loop.var}, loop.begin * dst.col_coef);
  if (has_src) emit_base_pointer(r9, src, {loop.var}, loop.begin * src.col_coef);

  // A partial vector with strided lanes on either side would go through the bounce buffer
  // twice, each a stalled store forward (a 5-lane transposing filter pack was a sixth of a
  // small kernel's time); a plain copy moves its elements directly instead. So does a copy
  // widening strided 16-bit lanes to f32 (a 16-bit filter's pack, a transposed 16-bit dy),
  // whole vectors too: its gather through the bounce buffer stalls once per vector.
  const bool strided =
      has_src && src.shape != ColumnShape::kBroadcast && (src.col_coef != 1 || dst.col_coef != 1);
  const bool element_copy = strided && !store->accumulate && src.dtype == dst.dtype;
  const bool element_widen = strided && !store->accumulate && src.elem_bytes == 2 &&
                             dst.dtype == DType::kFloat32 && src.col_coef != 1;
  auto body = [&](int count) {
    if ((element_copy && count < vl) || element_widen) {
      for (int lane = 0; lane < count; ++lane) {
        const RegExp to = lane_addr(VecRef{r8, 0, dst.col_coef, count}, lane, dst.elem_bytes);
        const RegExp from = lane_addr(VecRef{r9, 0, src.col_coef, count}, lane, src.elem_bytes);
        if (element_widen) {
          widen_element(to, from, src.dtype);
        } else {
          copy_element(to, from, dst.elem_bytes);
        }
      }
      return;
    }
    if (has_src) {
      if (src.shape != ColumnShape::kBroadcast && src.col_coef != 1 &&
          src.dtype == DType::kFloat32 && count == vl) {
        gather_f32(0, 2, VecRef{r9, 0, src.col_coef, count});  // a transposing copy
      } else if (src.shape != ColumnShape::kBroadcast) {
        load_vector(0, src.dtype, VecRef{r9, 0, src.col_coef, count});
      } else {
        load_broadcast(0, src.dtype, r9);
      }
      if (store->accumulate) {
        load_vector(1, dst.dtype, VecRef{r8, 0, dst.col_coef, count});
        if (dst_wide) {
          vaddpd(vreg(0), vreg(0), vreg(1));
        } else {
          vaddps(vreg(0), vreg(0), vreg(1));
        }
      }
    } else {
      zero_vector(0);
    }
    store_vector(0, dst.dtype, VecRef{r8, 0, dst.col_coef, count}, 2, 3);
  };

  const std::int64_t full = trip / vl;
  const int tail = static_cast<int>(trip % vl);
  emit_counted_loop(full, [&] {
    body(static_cast<int>(vl));
    add_imm(r8, vl * dst.col_coef * dst.elem_bytes);
    if (has_src) add_imm(r9, vl * src.col_coef * src.elem_bytes);
  });
  if (tail > 0 && full > 0 && !store->accumulate && (!has_src || src.buffer != dst.buffer)) {
    // A copy or zero fill may store the last whole vector again over elements it already
    // wrote, with the same values, instead of a masked part of one (slow on AMD): step back.
    const std::int64_t back = static_cast<std::int64_t>(vl) - tail;
    add_imm(r8, -back * dst.col_coef * dst.elem_bytes);
    if (has_src) add_imm(r9, -back * src.col_coef * src.elem_bytes);
    body(static_cast<int>(vl));
  } else if (tail > 0) {
    body(tail);
  }
  k1_count_ = -1;
  return true;
}

bool Emitter::analyze_copy_pair(const ir::Loop& loop, CopyPair* out, bool allow_zero_second) {
  if (loop.body.size() != 2 || loop.step != 1 || loop.trip_count() < 1) return false;
  const auto* first = std::get_if<ir::Store>(&loop.body[0].node);
  const auto* second = std::get_if<ir::Store>(&loop.body[1].node);
  if (first == nullptr || second == nullptr || !first->has_src ||
      (!second->has_src && !allow_zero_second) || first->accumulate || second->accumulate) {
    return false;
  }
  out->first = first;
  out->second = second;
  out->zero_second = !second->has_src;
  const std::int64_t trip = loop.trip_count();
  return analyze_access(nest_, first->dst, -1, loop.var, trip, &out->d0) &&
         analyze_access(nest_, second->dst, -1, loop.var, trip, &out->d1) &&
         analyze_access(nest_, first->src, -1, loop.var, trip, &out->s0) &&
         (out->zero_second || analyze_access(nest_, second->src, -1, loop.var, trip, &out->s1));
}

bool Emitter::try_emit_repeat_store_loop(const ir::Loop& loop) {
  CopyPair copy;
  if (!analyze_copy_pair(loop, &copy) || !(copy.first->src == copy.second->src)) return false;
  const std::int64_t trip = loop.trip_count();
  const AccessInfo &d0 = copy.d0, &d1 = copy.d1, &src = copy.s0;
  // dst[2i + c] and dst[2i + c + 1] from src[i], f32 destination, contiguous source.
  const ir::Affine gap = d1.offset - d0.offset;
  if (d0.buffer != d1.buffer || d0.buffer == src.buffer || d0.dtype != DType::kFloat32 ||
      d0.col_coef != 2 || d1.col_coef != 2 || !gap.is_constant() || gap.constant != 1 ||
      src.shape != ColumnShape::kContiguous || src.col_coef != 1 || src.dtype == DType::kFloat64) {
    return false;
  }
  const int vl = static_cast<int>(lanes(DType::kFloat32));
  k1_count_ = -1;
  emit_base_pointer(r8, d0, {loop.var}, loop.begin * 2);
  emit_base_pointer(r9, src, {loop.var}, loop.begin);
  // Index vectors: lanes 0,0,1,1,... and vl/2,vl/2,... of the source.
  vmovups(vreg(4), ptr[rip + const_repeat_]);
  vmovups(vreg(5), ptr[rip + const_repeat_ + vl * 4]);
  // vpermps takes ymm or zmm operands (a Zmm is a Ymm to Xbyak).
  auto wide = [&](int i) -> Ymm { return avx512_ ? Ymm(Zmm(i)) : Ymm(i); };
  auto body = [&](int count) {
    load_vector(0, src.dtype, VecRef{r9, 0, 1, count});
    vpermps(wide(1), wide(4), wide(0));
    store_vector(1, DType::kFloat32, VecRef{r8, 0, 1, std::min(2 * count, vl)}, 6, 7);
    if (2 * count > vl) {
      vpermps(wide(2), wide(5), wide(0));
      store_vector(2, DType::kFloat32, VecRef{r8, vl * 4, 1, 2 * count - vl}, 6, 7);
    }
  };
  const std::int64_t full = trip / vl;
  const int tail = static_cast<int>(trip % vl);
  emit_counted_loop(full, [&] {
    body(vl);
    add_imm(r8, 2 * vl * 4);
    add_imm(r9, vl * src.elem_bytes);
  });
  if (tail > 0) body(tail);
  k1_count_ = -1;
  return true;
}

bool Emitter::try_emit_interleave_store_loop(const ir::Loop& loop) {
  CopyPair copy;
  if (!analyze_copy_pair(loop, &copy, /*allow_zero_second=*/true)) return false;
  const std::int64_t trip = loop.trip_count();
  const bool zero = copy.zero_second;
  // A zero second member: as if its source were the first's (only the checks read it).
  const AccessInfo &d0 = copy.d0, &d1 = copy.d1, &s0 = copy.s0, &s1 = zero ? copy.s0 : copy.s1;
  // dst[2i] = s0[i] and dst[2i + 1] = s1[i] (or 0), all one 16-bit type, both sources
  // contiguous in one buffer a constant distance apart (one base register and a displacement).
  const ir::Affine dst_gap = d1.offset - d0.offset, src_gap = s1.offset - s0.offset;
  const bool sixteen =
      d0.elem_bytes == 2 && d0.dtype == d1.dtype && s0.dtype == d0.dtype && s1.dtype == d0.dtype;
  if (!sixteen || d0.buffer != d1.buffer || s0.buffer != s1.buffer || d0.buffer == s0.buffer ||
      d0.col_coef != 2 || d1.col_coef != 2 || !dst_gap.is_constant() || dst_gap.constant != 1 ||
      s0.col_coef != 1 || s1.col_coef != 1 || s0.shape != ColumnShape::kContiguous ||
      !src_gap.is_constant() || !fits_int32((std::llabs(src_gap.constant) + 64) * 2)) {
    return false;
  }
  const std::int32_t second_src = static_cast<std::int32_t>(src_gap.constant * 2);
  // Pairs per vector: one dword lane each.
  const int vl = static_cast<int>(lanes(DType::kFloat32));
  k1_count_ = -1;
  emit_base_pointer(r8, d0, {loop.var}, loop.begin * 2);
  emit_base_pointer(r9, s0, {loop.var}, loop.begin);
  auto body = [&](int count) {
    if (count < vl) {
      for (int lane = 0; lane < count; ++lane) {
        copy_element(r8 + lane * 4, r9 + lane * 2, 2);
        if (zero) {
          mov(word[r8 + lane * 4 + 2], 0);
        } else {
          copy_element(r8 + lane * 4 + 2, r9 + second_src + lane * 2, 2);
        }
      }
      return;
    }
    // Zero-extend each source's halves into dwords, move the second into the high halves (a
    // zero second member: the zero extension is the pair).
    if (avx512_) {
      vpmovzxwd(Zmm(0), ptr[r9]);
      if (!zero) {
        vpmovzxwd(Zmm(1), ptr[r9 + second_src]);
        vpslld(Zmm(1), Zmm(1), 16);
        vpord(Zmm(0), Zmm(0), Zmm(1));
      }
      vmovdqu32(ptr[r8], Zmm(0));
    } else {
      vpmovzxwd(Ymm(0), ptr[r9]);
      if (!zero) {
        vpmovzxwd(Ymm(1), ptr[r9 + second_src]);
        vpslld(Ymm(1), Ymm(1), 16);
        vpor(Ymm(0), Ymm(0), Ymm(1));
      }
      vmovdqu(ptr[r8], Ymm(0));
    }
  };
  emit_counted_loop(trip / vl, [&] {
    body(vl);
    add_imm(r8, vl * 4);
    add_imm(r9, vl * 2);
  });
  if (trip % vl != 0) body(static_cast<int>(trip % vl));
  k1_count_ = -1;
  return true;
}

void Emitter::emit_counted_loop(std::int64_t iterations, const std::function<void()>& body) {
  if (iterations <= 0) return;
  Label head;
  mov(r10, static_cast<std::uint64_t>(iterations));
  L(head);
  body();
  dec(r10);
  jnz(head, T_NEAR);
}

void Emitter::emit_scalar_store(const ir::Store& store) {
  AccessInfo dst, src;
  // check_nest() accepted every store access, so analysis cannot fail here.
  analyze_access(nest_, store.dst, -1, -1, 1, &dst);
  if (store.has_src) analyze_access(nest_, store.src, -1, -1, 1, &src);
  const bool wide = dst.dtype == DType::kFloat64 || (store.has_src && src.dtype == DType::kFloat64);
  emit_base_pointer(r8, dst, {}, 0);
  if (store.has_src) {
    emit_base_pointer(r9, src, {}, 0);
    load_scalar(0, src.dtype, r9, wide);
    if (store.accumulate) {
      load_scalar(1, dst.dtype, r8, wide);
      if (wide) {
        vaddsd(xmm0, xmm0, xmm1);
      } else {
        vaddss(xmm0, xmm0, xmm1);
      }
    }
  } else {
    vxorps(xmm0, xmm0, xmm0);
  }
  store_scalar(0, dst.dtype, r8, wide);
}

}  // namespace convjit::codegen::x86
