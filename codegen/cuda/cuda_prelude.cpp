#include "codegen/cuda/cuda_prelude.hpp"

namespace convjit::codegen {

std::string_view nvrtc_prelude() {
  static constexpr std::string_view kPrelude =
      R"cuda(// ---- convjit portable layer, NVRTC definitions (version 1) ----
#define CJ_DEVICE __device__ __forceinline__
#define CJ_KERNEL extern "C" __global__
#define CJ_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#define CJ_UNROLL _Pragma("unroll")
#define CJ_NO_UNROLL _Pragma("unroll 1")
#define CJ_SHARED(type, name, count) __shared__ __align__(16) type name[count]
#define CJ_LDG(pointer, index) ((pointer)[index])
#define CJ_STG(pointer, index, value) ((pointer)[index] = (value))
#define CJ_LDS(array, index) ((array)[index])
#define CJ_STS(array, index, value) ((array)[index] = (value))

// The tensors of a launch, passed by value (one kernel parameter).
struct cj_args {
  void* x;
  void* w;
  void* y;
  void* workspace;
};

// IEEE binary16 and bfloat16 as their bits.
struct __align__(2) cj_half { unsigned short bits; };
struct __align__(2) cj_bf16 { unsigned short bits; };

CJ_DEVICE float cj_half_to_float(cj_half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
CJ_DEVICE cj_half cj_float_to_half(float f) {
  cj_half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
CJ_DEVICE float cj_bf16_to_float(cj_bf16 b) { return __uint_as_float(((unsigned)b.bits) << 16); }
// Round to nearest even; NaN stays a (quiet) NaN.
CJ_DEVICE cj_bf16 cj_float_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  cj_bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = (unsigned short)((u >> 16) | 0x40u);
  } else {
    b.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return b;
}
// TF32 as mma.sync reads it: f32 rounded to 10 mantissa bits (nearest, ties away).
CJ_DEVICE unsigned cj_f32_to_tf32(float f) {
  unsigned t;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(f));
  return t;
}
CJ_DEVICE float cj_fma(float a, float b, float c) { return fmaf(a, b, c); }
CJ_DEVICE double cj_fma(double a, double b, double c) { return fma(a, b, c); }

CJ_DEVICE unsigned cj_shared_address(const void* pointer) {
  unsigned address;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
      : "=r"(address)
      : "l"(pointer));
  return address;
}

// ---- warp shuffles (all 32 lanes take part)
CJ_DEVICE unsigned cj_shfl_xor(unsigned v, int lane_mask) {
  unsigned r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane_mask));
  return r;
}
CJ_DEVICE unsigned cj_shfl_down(unsigned v, int delta) {
  unsigned r;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(delta));
  return r;
}
CJ_DEVICE unsigned cj_shfl_idx(unsigned v, int source_lane) {
  unsigned r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(source_lane));
  return r;
}
CJ_DEVICE float cj_shfl_xor(float v, int lane_mask) {
  return __uint_as_float(cj_shfl_xor(__float_as_uint(v), lane_mask));
}
CJ_DEVICE float cj_shfl_down(float v, int delta) {
  return __uint_as_float(cj_shfl_down(__float_as_uint(v), delta));
}
CJ_DEVICE float cj_shfl_idx(float v, int source_lane) {
  return __uint_as_float(cj_shfl_idx(__float_as_uint(v), source_lane));
}
CJ_DEVICE double cj_shfl_xor(double v, int lane_mask) {
  const unsigned long long u = __double_as_longlong(v);
  const unsigned lo = cj_shfl_xor((unsigned)u, lane_mask);
  const unsigned hi = cj_shfl_xor((unsigned)(u >> 32), lane_mask);
  return __longlong_as_double((long long)(((unsigned long long)hi << 32) | lo));
}

// ---- ldmatrix: 8x8 matrices of 16-bit elements, one 16-byte row address per lane
CJ_DEVICE void cj_ldmatrix_x1(unsigned (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
               : "=r"(r[0]) : "r"(cj_shared_address(row)));
}
CJ_DEVICE void cj_ldmatrix_x2(unsigned (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(cj_shared_address(row)));
}
CJ_DEVICE void cj_ldmatrix_x4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cj_shared_address(row)));
}
CJ_DEVICE void cj_ldmatrix_x1_trans(unsigned (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
               : "=r"(r[0]) : "r"(cj_shared_address(row)));
}
CJ_DEVICE void cj_ldmatrix_x2_trans(unsigned (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(cj_shared_address(row)));
}
CJ_DEVICE void cj_ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cj_shared_address(row)));
}

// ---- mma.sync: acc += A * B on the warp's fragments (PTX ISA fragment layouts)
CJ_DEVICE void cj_mma_m16n8k16_f16(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
CJ_DEVICE void cj_mma_m16n8k16_bf16(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
CJ_DEVICE void cj_mma_m16n8k8_tf32(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
CJ_DEVICE void cj_mma_m8n8k4_f64(double (&acc)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(acc[0]), "+d"(acc[1])
               : "d"(a), "d"(b));
}

// ---- cp.async: global -> shared copies of 4, 8 or 16 bytes; src_bytes < size zero-fills the
// rest (0: all zeros, nothing read). A copy is visible once its group has been waited on.
CJ_DEVICE void cj_cp_async_4(void* shared, const void* global, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
               :: "r"(cj_shared_address(shared)), "l"(global), "r"(src_bytes) : "memory");
}
CJ_DEVICE void cj_cp_async_8(void* shared, const void* global, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
               :: "r"(cj_shared_address(shared)), "l"(global), "r"(src_bytes) : "memory");
}
CJ_DEVICE void cj_cp_async_16(void* shared, const void* global, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(cj_shared_address(shared)), "l"(global), "r"(src_bytes) : "memory");
}
CJ_DEVICE void cj_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most `pending` of this thread's most recent groups are still in flight.
template <int pending>
CJ_DEVICE void cj_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(pending) : "memory");
}
// ---- end of the portable layer ----
)cuda";
  return kPrelude;
}

}  // namespace convjit::codegen
