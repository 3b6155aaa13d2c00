// Dtype-aware vector and scalar loads/stores of the x86 emitter. Registers hold the
// accumulator type: f32 lanes for half, bfloat16 and float32, f64 lanes for float64.
// bfloat16 widens by a 16-bit shift; half through F16C. Narrowing rounds to nearest even
// (vcvtps2ph imm 0; vcvtneps2bf16 where the CPU has it, else integer rounding with NaNs
// kept quiet).
#include "codegen/x86/emitter.hpp"

#include <algorithm>

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

const Xmm& Emitter::vreg(int idx) const { return vregs_.at(static_cast<std::size_t>(idx)); }

const Xmm& Emitter::hreg(int idx) const { return hregs_.at(static_cast<std::size_t>(idx)); }

void Emitter::zero_vector(int idx) {
  if (avx512_) {
    vpxord(vreg(idx), vreg(idx), vreg(idx));
  } else {
    vxorps(vreg(idx), vreg(idx), vreg(idx));
  }
}

void Emitter::set_mask(int count) {
  if (k1_count_ == count) return;
  mov(eax, static_cast<std::uint32_t>(count >= 32 ? 0xFFFFFFFFu : (1u << count) - 1u));
  kmovd(k1, eax);
  k1_count_ = count;
}

RegExp Emitter::lane_addr(const VecRef& ref, std::int64_t lane, int elem_bytes) {
  return ref.base + static_cast<std::int32_t>(ref.disp + lane * ref.lane_stride * elem_bytes);
}

void Emitter::copy_element(const RegExp& dst, const RegExp& src, int elem_bytes) {
  switch (elem_bytes) {
    case 2:
      movzx(eax, word[src]);
      mov(word[dst], ax);
      break;
    case 4:
      mov(eax, dword[src]);
      mov(dword[dst], eax);
      break;
    default:
      mov(rax, qword[src]);
      mov(qword[dst], rax);
      break;
  }
}

void Emitter::widen_element(const RegExp& dst, const RegExp& src, DType src_dtype) {
  movzx(eax, word[src]);
  if (src_dtype == DType::kBFloat16) {
    shl(eax, 16);  // bfloat16 is the high half of its f32
    mov(dword[dst], eax);
  } else {
    vmovd(xmm0, eax);
    vcvtph2ps(xmm0, xmm0);
    vmovss(dword[dst], xmm0);
  }
}

void Emitter::copy_lanes_to_bounce(const VecRef& ref, int elem_bytes) {
  if (ref.count >= kLaneLoopMin) {
    copy_lanes_loop(ref, elem_bytes, /*to_bounce=*/true);
    return;
  }
  for (int l = 0; l < ref.count; ++l) {
    copy_element(rsp + l * elem_bytes, lane_addr(ref, l, elem_bytes), elem_bytes);
  }
}

void Emitter::copy_lanes_from_bounce(const VecRef& ref, int elem_bytes) {
  if (ref.count >= kLaneLoopMin) {
    copy_lanes_loop(ref, elem_bytes, /*to_bounce=*/false);
    return;
  }
  for (int l = 0; l < ref.count; ++l) {
    copy_element(lane_addr(ref, l, elem_bytes), rsp + l * elem_bytes, elem_bytes);
  }
}

void Emitter::copy_lanes_loop(const VecRef& ref, int elem_bytes, bool to_bounce) {
  if (ref.base == rax || ref.base == rcx || ref.base == rdx) {
    throw Xbyak::Error(Xbyak::ERR_BAD_PARAMETER);  // an emitter bug: those are the loop's
  }
  lea(rdx, ptr[lane_addr(ref, 0, elem_bytes)]);
  xor_(ecx, ecx);
  Label lane;
  L(lane);
  const RegExp bounce = rsp + rcx * elem_bytes;
  if (to_bounce) {
    copy_element(bounce, rdx, elem_bytes);
  } else {
    copy_element(rdx, bounce, elem_bytes);
  }
  add(rdx, static_cast<std::uint32_t>(ref.lane_stride * elem_bytes));  // lane_addr's int32 too
  inc(ecx);
  cmp(ecx, ref.count);
  jb(lane);
}

void Emitter::load_vector(int dst, DType dtype, const VecRef& ref) {
  const int eb = dtype_size(dtype);
  const int full = lanes(dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32);
  const Xmm v = vreg(dst);
  const Xmm h = hreg(dst);
  const bool contiguous = ref.lane_stride == 1;
  if (contiguous && ref.count == full) {
    const Address a = ptr[lane_addr(ref, 0, eb)];
    switch (dtype) {
      case DType::kFloat32: vmovups(v, a); break;
      case DType::kFloat64: vmovupd(v, a); break;
      case DType::kBFloat16:
        vpmovzxwd(v, a);
        vpslld(v, v, 16);
        break;
      case DType::kHalf: vcvtph2ps(v, a); break;
    }
    return;
  }
  if (contiguous && avx512_) {
    set_mask(ref.count);
    const Address a = ptr[lane_addr(ref, 0, eb)];
    switch (dtype) {
      case DType::kFloat32: vmovups(v | k1 | T_z, a); break;
      case DType::kFloat64: vmovupd(v | k1 | T_z, a); break;
      case DType::kBFloat16:
        vmovdqu16(h | k1 | T_z, a);
        vpmovzxwd(v, h);
        vpslld(v, v, 16);
        break;
      case DType::kHalf:
        vmovdqu16(h | k1 | T_z, a);
        vcvtph2ps(v, h);
        break;
    }
    return;
  }
  if (contiguous && dtype == DType::kFloat32) {
    load_f32_tail(dst, ref);
    return;
  }
  // Strided lanes, or an AVX2 tail of another type: gather into the bounce buffer, then load
  // it whole.
  copy_lanes_to_bounce(ref, eb);
  load_vector(dst, dtype, VecRef{rsp, 0, 1, full});
}

void Emitter::load_f32_tail(int dst, const VecRef& ref) {
  // Only the `count` lanes are read, with no temporary register: the bounce buffer's narrow
  // stores followed by a wide load stalled every reduction step of a masked tile on store
  // forwarding. Lanes at and past `count` are left zero (count <= 4) or hold copies of valid
  // lanes (count > 4); tiles never store them.
  const Xmm x = Xmm(dst);
  const int count = ref.count;
  if (count >= 4) {
    // Upper half first: the last four valid lanes, shifted down so lane k holds element 4 + k,
    // moved up; then the first four into the lower half. (vinsertf128 from the register
    // itself, not vperm2f128: 8 micro-ops on Zen 1 and 2, and the tail load runs at every
    // reduction point of a masked tile.)
    if (count > 4) {
      const int shift = 8 - count;
      vmovups(x, ptr[lane_addr(ref, count - 4, 4)]);
      std::uint8_t order = 0;
      for (int k = 0; k < 4; ++k) order |= static_cast<std::uint8_t>(std::min(k + shift, 3) << (2 * k));
      vpermilps(x, x, order);
      vinsertf128(Ymm(dst), Ymm(dst), x, 1);
      vinsertf128(Ymm(dst), Ymm(dst), ptr[lane_addr(ref, 0, 4)], 0);
    } else {
      vmovups(x, ptr[lane_addr(ref, 0, 4)]);  // VEX zeroes the upper half
    }
    return;
  }
  vmovss(x, dword[lane_addr(ref, 0, 4)]);
  for (int l = 1; l < count; ++l) {
    vinsertps(x, x, dword[lane_addr(ref, l, 4)], static_cast<std::uint8_t>(l << 4));
  }
}

void Emitter::gather_f32(int dst, int tmp, const VecRef& ref) {
  // Four lanes per xmm (vmovss, then vinsertps into lanes 1-3), quarters 1.. inserted whole.
  for (int quarter = 0; quarter * 4 < ref.count; ++quarter) {
    const Xmm x = Xmm(quarter == 0 ? dst : tmp);
    vmovss(x, dword[lane_addr(ref, quarter * 4, 4)]);
    for (int l = 1; l < 4; ++l) {
      vinsertps(x, x, dword[lane_addr(ref, quarter * 4 + l, 4)], static_cast<std::uint8_t>(l << 4));
    }
    if (quarter == 0) continue;
    if (avx512_) {
      vinsertf32x4(Zmm(dst), Zmm(dst), x, static_cast<std::uint8_t>(quarter));
    } else {
      vinsertf128(Ymm(dst), Ymm(dst), x, static_cast<std::uint8_t>(quarter));
    }
  }
}

void Emitter::load_broadcast(int dst, DType dtype, const RegExp& addr) {
  const Xmm v = vreg(dst);
  switch (dtype) {
    case DType::kFloat32: vbroadcastss(v, dword[addr]); break;
    case DType::kFloat64:
      if (avx512_) {
        vbroadcastsd(Zmm(dst), qword[addr]);
      } else {
        vbroadcastsd(Ymm(dst), qword[addr]);
      }
      break;
    case DType::kBFloat16:
      // vpbroadcastw leaves the word in both halves of every dword; masking the low half
      // instead of shifting runs on any vector pipe, where shifts share the FMA pipes.
      vpbroadcastw(v, word[addr]);
      if (avx512_) {
        vpandd(v, v, ptr[rip + const_hi16_]);
      } else {
        vpand(v, v, ptr[rip + const_hi16_]);
      }
      break;
    case DType::kHalf:
      vpbroadcastw(hreg(dst), word[addr]);
      vcvtph2ps(v, hreg(dst));
      break;
  }
}

int Emitter::round_to_bf16(int src, int t1, int t2) {
  const Xmm s = vreg(src);
  const Xmm a = vreg(t1);
  const Xmm b = vreg(t2);
  if (avx512_ && target_.has_avx512_bf16) {
    vcvtneps2bf16(hreg(t1), s, EvexEncoding);
    return t1;
  }
  // round-to-nearest-even on the bit pattern: x + 0x7FFF + ((x >> 16) & 1), high half.
  vpsrld(a, s, 16);
  if (avx512_) {
    vpandd(a, a, ptr[rip + const_one_]);
    vpaddd(a, a, ptr[rip + const_round_]);
    vpaddd(a, a, s);
    vpsrld(a, a, 16);
    // NaNs keep their sign and payload's top bits and become quiet.
    vcmpps(k2, s, s, 3);  // unordered
    vpsrld(b, s, 16);
    vpord(b, b, ptr[rip + const_quiet_]);
    vmovdqa32(a | k2, b);
    vpmovdw(hreg(t1), a);
    return t1;
  }
  vpand(a, a, ptr[rip + const_one_]);
  vpaddd(a, a, ptr[rip + const_round_]);
  vpaddd(a, a, s);
  vpsrld(a, a, 16);
  vcmpps(b, s, s, 3);
  vpsrld(s, s, 16);
  vpor(s, s, ptr[rip + const_quiet_]);
  vblendvps(a, a, s, b);
  // Pack the dwords (< 0x10000) to words; vpackusdw works per 128-bit half.
  vpackusdw(a, a, a);
  vpermq(Ymm(t1), Ymm(t1), 0x08);
  return t1;
}

void Emitter::store_vector_nontemporal(int src, DType dtype, const VecRef& ref, int t1, int t2) {
  const Address a = ptr[lane_addr(ref, 0, dtype_size(dtype))];
  switch (dtype) {
    case DType::kFloat32: vmovntps(a, vreg(src)); break;
    case DType::kFloat64: vmovntpd(a, vreg(src)); break;
    case DType::kHalf:
      vcvtps2ph(hreg(t1), vreg(src), 0);
      vmovntdq(a, hreg(t1));
      break;
    case DType::kBFloat16: vmovntdq(a, hreg(round_to_bf16(src, t1, t2))); break;
  }
}

void Emitter::store_vector(int src, DType dtype, const VecRef& ref, int t1, int t2) {
  const int eb = dtype_size(dtype);
  const int full = lanes(dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32);
  const Xmm v = vreg(src);
  const bool contiguous = ref.lane_stride == 1;
  if (contiguous && ref.count == full) {
    const Address a = ptr[lane_addr(ref, 0, eb)];
    switch (dtype) {
      case DType::kFloat32: vmovups(a, v); break;
      case DType::kFloat64: vmovupd(a, v); break;
      case DType::kHalf: vcvtps2ph(a, v, 0); break;
      case DType::kBFloat16: {
        const int r = round_to_bf16(src, t1, t2);
        if (avx512_) {
          vmovdqu16(a, hreg(r));
        } else {
          vmovdqu(a, hreg(r));
        }
        break;
      }
    }
    return;
  }
  if (contiguous && avx512_) {
    set_mask(ref.count);
    const Address a = ptr[lane_addr(ref, 0, eb)];
    switch (dtype) {
      case DType::kFloat32: vmovups(a | k1, v); break;
      case DType::kFloat64: vmovupd(a | k1, v); break;
      case DType::kHalf:
        vcvtps2ph(hreg(t1), v, 0);
        vmovdqu16(a | k1, hreg(t1));
        break;
      case DType::kBFloat16: {
        const int r = round_to_bf16(src, t1, t2);
        vmovdqu16(a | k1, hreg(r));
        break;
      }
    }
    return;
  }
  store_vector(src, dtype, VecRef{rsp, 0, 1, full}, t1, t2);
  copy_lanes_from_bounce(ref, eb);
}

void Emitter::load_scalar(int idx, DType dtype, const RegExp& addr, bool wide) {
  const Xmm x(idx);
  switch (dtype) {
    case DType::kFloat32: vmovss(x, dword[addr]); break;
    case DType::kFloat64: vmovsd(x, qword[addr]); return;
    case DType::kBFloat16:
      movzx(eax, word[addr]);
      shl(eax, 16);
      vmovd(x, eax);
      break;
    case DType::kHalf:
      movzx(eax, word[addr]);
      vmovd(x, eax);
      vcvtph2ps(x, x);
      break;
  }
  if (wide) vcvtss2sd(x, x, x);
}

void Emitter::store_scalar(int idx, DType dtype, const RegExp& addr, bool wide) {
  const Xmm x(idx);
  if (wide && dtype != DType::kFloat64) vcvtsd2ss(x, x, x);
  switch (dtype) {
    case DType::kFloat32: vmovss(dword[addr], x); break;
    case DType::kFloat64: vmovsd(qword[addr], x); break;
    case DType::kHalf:
      vcvtps2ph(x, x, 0);
      vmovd(eax, x);
      mov(word[addr], ax);
      break;
    case DType::kBFloat16: {
      Label nan, done;
      vmovd(eax, x);
      mov(ecx, eax);
      and_(ecx, 0x7FFFFFFF);
      cmp(ecx, 0x7F800000);
      ja(nan);
      mov(ecx, eax);
      shr(ecx, 16);
      and_(ecx, 1);
      add(ecx, 0x7FFF);
      add(eax, ecx);
      shr(eax, 16);
      jmp(done);
      L(nan);
      shr(eax, 16);
      or_(eax, 0x40);
      L(done);
      mov(word[addr], ax);
      break;
    }
  }
}

void Emitter::emit_constants() {
  // 64-byte vectors of dwords, read by the bfloat16 rounding and broadcasts (rip-relative,
  // read-only).
  align(64);
  L(const_one_);
  for (int i = 0; i < 16; ++i) dd(1);
  L(const_round_);
  for (int i = 0; i < 16; ++i) dd(0x7FFF);
  L(const_quiet_);
  for (int i = 0; i < 16; ++i) dd(0x40);
  L(const_hi16_);
  for (int i = 0; i < 16; ++i) dd(0xFFFF0000u);
  L(const_repeat_);
  for (int i = 0; i < 32; ++i) dd(static_cast<std::uint32_t>(i / 2));
}

}  // namespace convjit::codegen::x86
