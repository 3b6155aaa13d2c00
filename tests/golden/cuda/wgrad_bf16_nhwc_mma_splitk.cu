// kernel cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4
// workspace 294912
// tensors 65536 36864 131072 w
// launch cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4 5 1 4 128 1 1 27648
// launch cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4_reduce 72 1 1 256 1 1 0
// 
// convjit CUDA kernel cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4
// problem: direction=backprop_filter depthwise=false dtype=bfloat16 format=NHWC n=4 ih=16 iw=16 ic=32 kh=3 kw=3 filter_in=32 oc=64 groups=1 oh=16 ow=16 strides=[1,1] dilations=[1,1] pads=[1,1,1,1]
// plan:    target=sm_80 algo=mma math=bf16 tile=64x64x32 warps=2x2 stages=3 a=m-rows/16B b=n-rows/16B threads=128 splitk=4 smem=27648 workspace=294912
// Generated for this problem only: every size and stride is a constant.

typedef cj_bf16 elem_t;  // the tensors' element type
typedef float acc_t;  // the accumulation type
typedef int cj_index;  // element offsets

constexpr cj_index kBatch = 4;
constexpr cj_index kInH = 16, kInW = 16, kInC = 32;  // x
constexpr cj_index kKH = 3, kKW = 3, kFilterIn = 32, kOutC = 64;  // w (HWIO)
constexpr cj_index kGroups = 1, kOutCPerGroup = 64;
constexpr cj_index kOutH = 16, kOutW = 16;  // y
constexpr cj_index kStrideH = 1, kStrideW = 1;
constexpr cj_index kDilationH = 1, kDilationW = 1;
constexpr cj_index kPadTop = 1, kPadLeft = 1;
constexpr cj_index kXElements = 32768, kWElements = 18432, kYElements = 65536;

// Element offsets: x and y by (n, row, col, channel) in NHWC memory order, w by
// (kh, kw, i, o) in HWIO order.
CJ_DEVICE cj_index x_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 8192 + row * 512 + col * 32 + c * 1;
}
CJ_DEVICE cj_index y_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 16384 + row * 1024 + col * 64 + c * 1;
}
CJ_DEVICE cj_index w_offset(cj_index kh, cj_index kw, cj_index i, cj_index o) {
  return kh * 6144 + kw * 2048 + i * 64 + o;
}

CJ_DEVICE acc_t to_acc(elem_t v) { return cj_bf16_to_float(v); }
CJ_DEVICE elem_t from_acc(acc_t v) { return cj_float_to_bf16(v); }

// wgrad: w[m = (kh, kw, i), n = oc in group] = sum over k = (n, oh, ow) of x * dy
// GEMM M = 288, N = 64, K = 1024 per group; offsets of -1 read a zero.
CJ_DEVICE cj_index wgrad_a_offset(cj_index group, cj_index m, cj_index k) {
  const cj_index i = m % kFilterIn, kw = (m / kFilterIn) % kKW, kh = m / (kFilterIn * kKW);
  const cj_index ow = k % kOutW, oh = (k / kOutW) % kOutH, n = k / (kOutW * kOutH);
  const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;
  const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;
  if (ih < 0 || ih >= kInH || iw < 0 || iw >= kInW) return -1;
  return x_offset(n, ih, iw, group * kFilterIn + i);
}
CJ_DEVICE cj_index wgrad_b_offset(cj_index group, cj_index k, cj_index col) {
  const cj_index ow = k % kOutW, oh = (k / kOutW) % kOutH, n = k / (kOutW * kOutH);
  return y_offset(n, oh, ow, group * kOutCPerGroup + col);
}
CJ_DEVICE cj_index wgrad_c_offset(cj_index group, cj_index m, cj_index col) {
  return m * kOutC + group * kOutCPerGroup + col;
}

// CTA tile 64x64x32 on 2x2 warps, each 2 x 4 fragments of 16x8x16; 3-stage cp.async pipeline.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(128, 2) cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4(cj_args args) {
  const elem_t* __restrict__ a_src = static_cast<const elem_t*>(args.x);
  const elem_t* __restrict__ b_src = static_cast<const elem_t*>(args.y);
  acc_t* __restrict__ c_dst = static_cast<acc_t*>(args.workspace);
  // 16-byte runs of a need a 16-byte aligned tensor (a view may start anywhere).
  const bool a_runs = reinterpret_cast<unsigned long long>(a_src) % 16 == 0;
  // 16-byte runs of b need a 16-byte aligned tensor (a view may start anywhere).
  const bool b_runs = reinterpret_cast<unsigned long long>(b_src) % 16 == 0;
  constexpr cj_index kM = 288, kN = 64, kK = 1024, kKPerSplit = 256;
  CJ_SHARED(unsigned short, a_tile, 6912);  // [stage][k][m], rows of 72
  CJ_SHARED(unsigned short, b_tile, 6912);  // [stage][k][n], rows of 72
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = (warp % 2) * 32, warp_n = (warp / 2) * 32;
  const cj_index group = blockIdx.y / 1;
  const cj_index tile_m = cj_index(blockIdx.x) * 64;
  const cj_index tile_n = cj_index(blockIdx.y % 1) * 64;
  const cj_index k_begin = cj_index(blockIdx.z) * kKPerSplit;
  const cj_index k_end = k_begin + kKPerSplit < kK ? k_begin + kKPerSplit : kK;
  acc_t acc[2][4][4];
  CJ_UNROLL
  for (int i = 0; i < 2; ++i)
    CJ_UNROLL
    for (int j = 0; j < 4; ++j)
      CJ_UNROLL
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0;
  // Copies the k0 slice of both operands into `stage` (one cp.async group).
  auto load_stage = [&](int stage, cj_index k0) {
    if (a_runs) {
      for (int e = tid; e < 256; e += 128) {
        const int mm = (e % 8) * 8, kk = e / 8;
        const cj_index mn = tile_m + mm, k = k0 + kk;
        const cj_index offset = mn < kM && k < k_end ? wgrad_a_offset(group, mn, k) : -1;
        cj_cp_async_16(&a_tile[stage * 2304 + (kk) * 72 + mm], a_src + (offset >= 0 ? offset : 0), offset >= 0 ? 16 : 0);
      }
    }
    else {
      CJ_NO_UNROLL
      for (int e = tid; e < 2048; e += 128) {
        const int mm = e % 64, kk = e / 64;
        const cj_index mn = tile_m + mm, k = k0 + kk;
        const cj_index offset = mn < kM && k < k_end ? wgrad_a_offset(group, mn, k) : -1;
        CJ_STS(a_tile, stage * 2304 + (kk) * 72 + mm, offset >= 0 ? CJ_LDG(a_src, offset).bits : (unsigned short)0);
      }
    }
    if (b_runs) {
      for (int e = tid; e < 256; e += 128) {
        const int mm = (e % 8) * 8, kk = e / 8;
        const cj_index mn = tile_n + mm, k = k0 + kk;
        const cj_index offset = mn < kN && k < k_end ? wgrad_b_offset(group, k, mn) : -1;
        cj_cp_async_16(&b_tile[stage * 2304 + (kk) * 72 + mm], b_src + (offset >= 0 ? offset : 0), offset >= 0 ? 16 : 0);
      }
    }
    else {
      CJ_NO_UNROLL
      for (int e = tid; e < 2048; e += 128) {
        const int mm = e % 64, kk = e / 64;
        const cj_index mn = tile_n + mm, k = k0 + kk;
        const cj_index offset = mn < kN && k < k_end ? wgrad_b_offset(group, k, mn) : -1;
        CJ_STS(b_tile, stage * 2304 + (kk) * 72 + mm, offset >= 0 ? CJ_LDG(b_src, offset).bits : (unsigned short)0);
      }
    }
  };
  const cj_index k_tiles = (k_end - k_begin + 31) / 32;
  for (cj_index t = 0; t < k_tiles + 2; ++t) {
    if (t < k_tiles) load_stage(int(t % 3), k_begin + t * 32);
    cj_cp_async_commit();
    if (t < 2) continue;
    const cj_index slice = t - 2;
    cj_cp_async_wait<2>();  // the slice has landed
    __syncthreads();
    const int a_base = int(slice % 3) * 2304, b_base = int(slice % 3) * 2304;
    CJ_UNROLL
    for (int ks = 0; ks < 32; ks += 16) {
      unsigned a_frag[2][4], b_frag[4][2];
      CJ_UNROLL
      for (int i = 0; i < 2; ++i)
        cj_ldmatrix_x4_trans(a_frag[i], &a_tile[a_base + (ks + lane % 8 + (lane / 16) * 8) * 72 + warp_m + i * 16 + ((lane / 8) % 2) * 8]);
      CJ_UNROLL
      for (int j = 0; j < 4; ++j)
        cj_ldmatrix_x2_trans(b_frag[j], &b_tile[b_base + (ks + lane % 8 + ((lane / 8) % 2) * 8) * 72 + warp_n + j * 8]);
      CJ_UNROLL
      for (int i = 0; i < 2; ++i)
        CJ_UNROLL
        for (int j = 0; j < 4; ++j) cj_mma_m16n8k16_bf16(acc[i][j], a_frag[i], b_frag[j]);
    }
    __syncthreads();  // the stage is free for the next copy
  }
  cj_cp_async_wait<0>();
  CJ_UNROLL
  for (int i = 0; i < 2; ++i) {
    CJ_UNROLL
    for (int j = 0; j < 4; ++j) {
      CJ_UNROLL
      for (int r = 0; r < 4; ++r) {
        const cj_index m = tile_m + warp_m + i * 16 + lane / 4 + (r / 2) * 8;
        const cj_index col = tile_n + warp_n + j * 8 + (lane % 4) * 2 + r % 2;
        if (m >= kM || col >= kN) continue;
        CJ_STG(c_dst, cj_index(blockIdx.z) * kWElements + wgrad_c_offset(group, m, col), acc[i][j][r]);
      }
    }
  }
}

// The split-K slices of the filter gradient, summed in slice order (deterministic).
CJ_KERNEL void CJ_LAUNCH_BOUNDS(256, 2) cuda_sm80_bf16_bwd_filter_nhwc_mma_m64n64k32_w2x2_s3_amvbnv_sk4_reduce(cj_args args) {
  const acc_t* __restrict__ workspace = static_cast<const acc_t*>(args.workspace);
  elem_t* __restrict__ w = static_cast<elem_t*>(args.w);
  for (cj_index e = cj_index(blockIdx.x) * 256 + threadIdx.x; e < kWElements; e += cj_index(gridDim.x) * 256) {
    acc_t sum = CJ_LDG(workspace, e);
    CJ_UNROLL
    for (int slice = 1; slice < 4; ++slice) sum += CJ_LDG(workspace, slice * kWElements + e);
    CJ_STG(w, e, from_acc(sum));
  }
}
