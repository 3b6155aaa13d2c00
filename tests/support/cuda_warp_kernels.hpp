// Test kernels of the warp-level operations, written against convjit's portable layer: the
// interpret mode runs them in tests/unit/cuda_warp_ops_test.cpp (against plain matrix products
// and copies) and a GPU run compares them with the hardware (tests/cuda/cuda_gpu_test.cpp).
#pragma once

namespace convjit::testing {

// mma16: per lane 4 A and 2 B registers (x, w) and 4 accumulators (w after the B registers);
// writes the m16n8k16 f16, m16n8k16 bf16 and m16n8k8 tf32 results ([3][32][4] floats to y).
// mma_f64: m8n8k4 on one A and one B value per lane, accumulators starting at 0.5.
inline constexpr const char* kMmaKernels = R"cuda(
CJ_KERNEL void CJ_LAUNCH_BOUNDS(32, 1) mma16(cj_args args) {
  const unsigned* a = static_cast<const unsigned*>(args.x);  // [lane][4 A registers]
  const unsigned* b = static_cast<const unsigned*>(args.w);  // [lane][2 B registers], then
  const float* c = reinterpret_cast<const float*>(b + 64);   // [lane][4 accumulators]
  float* d = static_cast<float*>(args.y);                    // [3 shapes][lane][4]
  const int lane = threadIdx.x;
  unsigned ra[4], rb[2];
  for (int i = 0; i < 4; ++i) ra[i] = CJ_LDG(a, lane * 4 + i);
  for (int i = 0; i < 2; ++i) rb[i] = CJ_LDG(b, lane * 2 + i);
  float f16[4], bf16[4], tf32[4];
  for (int i = 0; i < 4; ++i) f16[i] = bf16[i] = tf32[i] = CJ_LDG(c, lane * 4 + i);
  cj_mma_m16n8k16_f16(f16, ra, rb);
  cj_mma_m16n8k16_bf16(bf16, ra, rb);
  cj_mma_m16n8k8_tf32(tf32, ra, rb);
  for (int i = 0; i < 4; ++i) {
    CJ_STG(d, lane * 4 + i, f16[i]);
    CJ_STG(d, 128 + lane * 4 + i, bf16[i]);
    CJ_STG(d, 256 + lane * 4 + i, tf32[i]);
  }
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(32, 1) mma_f64(cj_args args) {
  const double* a = static_cast<const double*>(args.x);
  const double* b = static_cast<const double*>(args.w);
  double* d = static_cast<double*>(args.y);
  const int lane = threadIdx.x;
  double acc[2] = {0.5, 0.5};
  cj_mma_m8n8k4_f64(acc, CJ_LDG(a, lane), CJ_LDG(b, lane));
  CJ_STG(d, lane * 2, acc[0]);
  CJ_STG(d, lane * 2 + 1, acc[1]);
}
)cuda";

inline constexpr const char* kLdmatrixKernel = R"cuda(
CJ_KERNEL void CJ_LAUNCH_BOUNDS(32, 1) ldmatrix_all(cj_args args) {
  unsigned* out = static_cast<unsigned*>(args.y);  // [6 variants][lane][4]
  CJ_SHARED(unsigned short, tile, 256);            // 32 rows of 8 16-bit values
  const int lane = threadIdx.x;
  for (int c = 0; c < 8; ++c) CJ_STS(tile, lane * 8 + c, (unsigned short)(lane * 8 + c + 1));
  __syncthreads();
  unsigned r1[1], r2[2], r4[4];
  cj_ldmatrix_x1(r1, &tile[(lane % 8) * 8]);
  CJ_STG(out, lane * 4, r1[0]);
  cj_ldmatrix_x2(r2, &tile[(lane % 16) * 8]);
  for (int j = 0; j < 2; ++j) CJ_STG(out, 128 + lane * 4 + j, r2[j]);
  cj_ldmatrix_x4(r4, &tile[lane * 8]);
  for (int j = 0; j < 4; ++j) CJ_STG(out, 256 + lane * 4 + j, r4[j]);
  cj_ldmatrix_x1_trans(r1, &tile[(lane % 8) * 8]);
  CJ_STG(out, 384 + lane * 4, r1[0]);
  cj_ldmatrix_x2_trans(r2, &tile[(lane % 16) * 8]);
  for (int j = 0; j < 2; ++j) CJ_STG(out, 512 + lane * 4 + j, r2[j]);
  cj_ldmatrix_x4_trans(r4, &tile[lane * 8]);
  for (int j = 0; j < 4; ++j) CJ_STG(out, 640 + lane * 4 + j, r4[j]);
}
)cuda";

inline constexpr const char* kCpAsyncKernel = R"cuda(
CJ_KERNEL void CJ_LAUNCH_BOUNDS(32, 1) cp_async_groups(cj_args args) {
  const float* src = static_cast<const float*>(args.x);        // 64 floats
  const unsigned* pairs = static_cast<const unsigned*>(args.w);  // 32 pairs
  float* out = static_cast<float*>(args.y);                      // [lane][8]
  CJ_SHARED(float, s, 64);
  CJ_SHARED(unsigned, p, 64);
  const int t = threadIdx.x;
  CJ_STS(s, t, -1.0f);
  CJ_STS(s, t + 32, -2.0f);
  CJ_STS(p, 2 * t, 7u);
  CJ_STS(p, 2 * t + 1, 7u);
  cj_cp_async_4(&s[t], src + t, 4);
  cj_cp_async_commit();                                  // group 1
  cj_cp_async_4(&s[t + 32], src + t + 32, 4);
  cj_cp_async_8(&p[2 * t], pairs + 2 * t, t % 2 == 0 ? 8 : 4);  // odd lanes: zero-fill half
  cj_cp_async_commit();                                  // group 2
  CJ_STG(out, t * 8 + 0, CJ_LDS(s, t));                  // nothing waited on: old value
  cj_cp_async_wait<1>();                                 // group 1 done, group 2 pending
  CJ_STG(out, t * 8 + 1, CJ_LDS(s, t));
  CJ_STG(out, t * 8 + 2, CJ_LDS(s, t + 32));
  cj_cp_async_wait<0>();
  CJ_STG(out, t * 8 + 3, CJ_LDS(s, t + 32));
  CJ_STG(out, t * 8 + 4, (float)CJ_LDS(p, 2 * t));
  CJ_STG(out, t * 8 + 5, (float)CJ_LDS(p, 2 * t + 1));
  __syncthreads();
  CJ_STG(out, t * 8 + 6, CJ_LDS(s, (t + 1) % 32));       // another lane's copy, after a barrier
  __syncthreads();                                       // that read is done before s[t] changes
  cj_cp_async_4(&s[t], src, 0);                          // src-size 0: zeros, nothing read
  cj_cp_async_commit();
  cj_cp_async_wait<0>();
  CJ_STG(out, t * 8 + 7, CJ_LDS(s, t));
}
)cuda";

inline constexpr const char* kShuffleKernel = R"cuda(
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) shuffles(cj_args args) {
  unsigned* out = static_cast<unsigned*>(args.y);  // [thread][4]
  const int t = threadIdx.x;
  const unsigned v = 3u * t + 1u;
  CJ_STG(out, t * 4 + 0, cj_shfl_xor(v, 5));
  CJ_STG(out, t * 4 + 1, cj_shfl_down(v, 3));
  CJ_STG(out, t * 4 + 2, cj_shfl_idx(v, 31 - t % 32));
  CJ_STG(out, t * 4 + 3, (unsigned)cj_shfl_xor((float)v, 16));
}
)cuda";

}  // namespace convjit::testing
