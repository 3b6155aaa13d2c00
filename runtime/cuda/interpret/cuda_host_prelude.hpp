// ---- convjit portable layer, host definitions for the interpret mode (version 1) ----
// Not a header of the library: its text (after cuda_interpret_abi.h) is placed before a
// generated kernel body, and the host C++ compiler builds the two into a shared object that the
// interpreter loads. Every special register, barrier, warp-level operation and memory access
// of the kernel calls into the interpreter (cj_api), which runs CUDA threads as fibers and
// checks bounds, races and uninitialised reads. No #include: the body may not rely on any.

#define CJ_DEVICE static inline
#define CJ_KERNEL extern "C" __attribute__((visibility("default")))
#define CJ_LAUNCH_BOUNDS(threads, min_blocks)
#define CJ_UNROLL
#define CJ_NO_UNROLL

static const cj_interpret_api* cj_api = 0;

extern "C" __attribute__((visibility("default"))) int cj_interpret_bind(
    const cj_interpret_api* api) {
  cj_api = api;
  return CJ_INTERPRET_ABI_VERSION;
}

#define threadIdx (*cj_api->thread_idx())
#define blockIdx (*cj_api->block_idx())
#define blockDim (*cj_api->block_dim())
#define gridDim (*cj_api->grid_dim())
#define __syncthreads() cj_api->sync_threads(__LINE__)

#define CJ_SHARED(type, name, count) \
  type* const name =                 \
      static_cast<type*>(cj_api->shared_array(sizeof(type) * (count), 16, #name, __LINE__))
#define CJ_LDG(pointer, index) cj_load_global((pointer), (long long)(index), __LINE__)
#define CJ_STG(pointer, index, value) \
  cj_store_global((pointer), (long long)(index), (value), __LINE__)
#define CJ_LDS(array, index) cj_load_shared((array), (long long)(index), __LINE__)
#define CJ_STS(array, index, value) cj_store_shared((array), (long long)(index), (value), __LINE__)

template <typename T>
static inline T cj_load_global(const T* base, long long index, int line) {
  const T* address = base + index;
  if (!cj_api->global_access(base, address, sizeof(T), 0, line)) return T();
  return *address;
}
template <typename T, typename V>
static inline void cj_store_global(T* base, long long index, const V& value, int line) {
  T* address = base + index;
  if (cj_api->global_access(base, address, sizeof(T), 1, line)) *address = value;
}
template <typename T>
static inline T cj_load_shared(const T* base, long long index, int line) {
  const T* address = base + index;
  if (!cj_api->shared_access(base, address, sizeof(T), 0, line)) return T();
  return *address;
}
template <typename T, typename V>
static inline void cj_store_shared(T* base, long long index, const V& value, int line) {
  T* address = base + index;
  if (cj_api->shared_access(base, address, sizeof(T), 1, line)) *address = value;
}

// The tensors of a launch.
struct cj_args {
  void* x;
  void* w;
  void* y;
  void* workspace;
};

// IEEE binary16 and bfloat16 as their bits; conversions round to nearest even as the GPU's
// cvt.rn does.
struct cj_half {
  unsigned short bits;
};
struct cj_bf16 {
  unsigned short bits;
};

static inline unsigned cj_float_bits(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
static inline float cj_bits_float(unsigned u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

static inline float cj_half_to_float(cj_half h) {
  const unsigned sign = (unsigned)(h.bits & 0x8000u) << 16;
  const unsigned exponent = (h.bits >> 10) & 0x1fu;
  const unsigned mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = (float)mantissa * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return cj_bits_float(sign | 0x7f800000u | (mantissa << 13));
  return cj_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

static inline cj_half cj_float_to_half(float f) {
  const unsigned u = cj_float_bits(f);
  const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  const unsigned magnitude = u & 0x7fffffffu;
  cj_half h;
  if (magnitude >= 0x7f800000u) {  // infinity, NaN (kept quiet)
    h.bits = (unsigned short)(sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u));
    return h;
  }
  if (magnitude >= 0x47800000u) {  // 2^16 and above: infinity
    h.bits = (unsigned short)(sign | 0x7c00u);
    return h;
  }
  const int exponent = (int)(magnitude >> 23) - 127;
  if (exponent >= -14) {  // a normal half; a carry out of the mantissa bumps the exponent
    const unsigned mantissa = magnitude & 0x7fffffu;
    unsigned bits = ((unsigned)(exponent + 15) << 10) | (mantissa >> 13);
    const unsigned rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (bits & 1u) != 0)) ++bits;
    h.bits = (unsigned short)(sign | bits);
    return h;
  }
  if (exponent < -25) {  // below half the smallest subnormal: zero
    h.bits = sign;
    return h;
  }
  // A subnormal half: the 24-bit significand in units of 2^-24.
  const unsigned significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 1;
  unsigned bits = significand >> shift;
  const unsigned rest = significand & ((1u << shift) - 1u);
  const unsigned half_unit = 1u << (shift - 1);
  if (rest > half_unit || (rest == half_unit && (bits & 1u) != 0)) ++bits;
  h.bits = (unsigned short)(sign | bits);
  return h;
}

static inline float cj_bf16_to_float(cj_bf16 b) { return cj_bits_float((unsigned)b.bits << 16); }

static inline cj_bf16 cj_float_to_bf16(float f) {
  const unsigned u = cj_float_bits(f);
  cj_bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = (unsigned short)((u >> 16) | 0x40u);
  } else {
    b.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return b;
}

// cvt.rna.tf32.f32: 10 mantissa bits, nearest with ties away from zero.
static inline unsigned cj_f32_to_tf32(float f) {
  const unsigned u = cj_float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  // infinity and NaN pass through
  return (u + 0x1000u) & 0xffffe000u;
}

static inline float cj_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double cj_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }

// ---- warp shuffles (all 32 lanes take part)
static inline unsigned cj_shfl(int mode, unsigned v, int operand, int line) {
  unsigned r = 0;
  cj_api->shfl(mode, v, operand, &r, line);
  return r;
}
static inline unsigned cj_shfl_xor(unsigned v, int lane_mask, int line = __builtin_LINE()) {
  return cj_shfl(CJ_SHFL_XOR, v, lane_mask, line);
}
static inline unsigned cj_shfl_down(unsigned v, int delta, int line = __builtin_LINE()) {
  return cj_shfl(CJ_SHFL_DOWN, v, delta, line);
}
static inline unsigned cj_shfl_idx(unsigned v, int source_lane, int line = __builtin_LINE()) {
  return cj_shfl(CJ_SHFL_IDX, v, source_lane, line);
}
static inline float cj_shfl_xor(float v, int lane_mask, int line = __builtin_LINE()) {
  return cj_bits_float(cj_shfl(CJ_SHFL_XOR, cj_float_bits(v), lane_mask, line));
}
static inline float cj_shfl_down(float v, int delta, int line = __builtin_LINE()) {
  return cj_bits_float(cj_shfl(CJ_SHFL_DOWN, cj_float_bits(v), delta, line));
}
static inline float cj_shfl_idx(float v, int source_lane, int line = __builtin_LINE()) {
  return cj_bits_float(cj_shfl(CJ_SHFL_IDX, cj_float_bits(v), source_lane, line));
}
static inline double cj_shfl_xor(double v, int lane_mask, int line = __builtin_LINE()) {
  unsigned long long u;
  __builtin_memcpy(&u, &v, 8);
  const unsigned lo = cj_shfl(CJ_SHFL_XOR, (unsigned)u, lane_mask, line);
  const unsigned hi = cj_shfl(CJ_SHFL_XOR, (unsigned)(u >> 32), lane_mask, line);
  u = ((unsigned long long)hi << 32) | lo;
  __builtin_memcpy(&v, &u, 8);
  return v;
}

// ---- ldmatrix
static inline void cj_ldmatrix_x1(unsigned (&r)[1], const void* row, int line = __builtin_LINE()) {
  cj_api->ldmatrix(1, 0, row, r, line);
}
static inline void cj_ldmatrix_x2(unsigned (&r)[2], const void* row, int line = __builtin_LINE()) {
  cj_api->ldmatrix(2, 0, row, r, line);
}
static inline void cj_ldmatrix_x4(unsigned (&r)[4], const void* row, int line = __builtin_LINE()) {
  cj_api->ldmatrix(4, 0, row, r, line);
}
static inline void cj_ldmatrix_x1_trans(unsigned (&r)[1], const void* row,
                                        int line = __builtin_LINE()) {
  cj_api->ldmatrix(1, 1, row, r, line);
}
static inline void cj_ldmatrix_x2_trans(unsigned (&r)[2], const void* row,
                                        int line = __builtin_LINE()) {
  cj_api->ldmatrix(2, 1, row, r, line);
}
static inline void cj_ldmatrix_x4_trans(unsigned (&r)[4], const void* row,
                                        int line = __builtin_LINE()) {
  cj_api->ldmatrix(4, 1, row, r, line);
}

// ---- mma.sync
static inline void cj_mma_m16n8k16_f16(float (&acc)[4], const unsigned (&a)[4],
                                       const unsigned (&b)[2], int line = __builtin_LINE()) {
  cj_api->mma(CJ_MMA_M16N8K16_F16, a, b, acc, line);
}
static inline void cj_mma_m16n8k16_bf16(float (&acc)[4], const unsigned (&a)[4],
                                        const unsigned (&b)[2], int line = __builtin_LINE()) {
  cj_api->mma(CJ_MMA_M16N8K16_BF16, a, b, acc, line);
}
static inline void cj_mma_m16n8k8_tf32(float (&acc)[4], const unsigned (&a)[4],
                                       const unsigned (&b)[2], int line = __builtin_LINE()) {
  cj_api->mma(CJ_MMA_M16N8K8_TF32, a, b, acc, line);
}
static inline void cj_mma_m8n8k4_f64(double (&acc)[2], double a, double b,
                                     int line = __builtin_LINE()) {
  cj_api->mma(CJ_MMA_M8N8K4_F64, &a, &b, acc, line);
}

// ---- cp.async
static inline void cj_cp_async_4(void* shared, const void* global, int src_bytes,
                                 int line = __builtin_LINE()) {
  cj_api->cp_async(shared, global, 4, src_bytes, line);
}
static inline void cj_cp_async_8(void* shared, const void* global, int src_bytes,
                                 int line = __builtin_LINE()) {
  cj_api->cp_async(shared, global, 8, src_bytes, line);
}
static inline void cj_cp_async_16(void* shared, const void* global, int src_bytes,
                                  int line = __builtin_LINE()) {
  cj_api->cp_async(shared, global, 16, src_bytes, line);
}
static inline void cj_cp_async_commit() { cj_api->cp_async_commit(); }
template <int pending>
static inline void cj_cp_async_wait(int line = __builtin_LINE()) {
  cj_api->cp_async_wait(pending, line);
}
// ---- end of the portable layer ----
