// kernel cuda_sm80_f16_bwd_data_dw_nchw_dw_c16p16
// workspace 0
// tensors 5184 576 3200 x
// launch cuda_sm80_f16_bwd_data_dw_nchw_dw_c16p16 11 1 1 256 1 1 1152
// 
// convjit CUDA kernel cuda_sm80_f16_bwd_data_dw_nchw_dw_c16p16
// problem: direction=backprop_data depthwise=true dtype=half format=NCHW n=2 ih=9 iw=9 ic=16 kh=3 kw=3 filter_in=1 oc=32 groups=16 oh=5 ow=5 strides=[2,2] dilations=[1,1] pads=[1,1,1,1]
// plan:    target=sm_80 algo=dw math=f16 cblock=16 pblock=16 mblock=2 threads=256 splitk=1 smem=1152 workspace=0
// Generated for this problem only: every size and stride is a constant.

typedef cj_half elem_t;  // the tensors' element type
typedef float acc_t;  // the accumulation type
typedef int cj_index;  // element offsets

constexpr cj_index kBatch = 2;
constexpr cj_index kInH = 9, kInW = 9, kInC = 16;  // x
constexpr cj_index kKH = 3, kKW = 3, kFilterIn = 1, kOutC = 32;  // w (HWIO)
constexpr cj_index kGroups = 16, kOutCPerGroup = 2;
constexpr cj_index kOutH = 5, kOutW = 5;  // y
constexpr cj_index kStrideH = 2, kStrideW = 2;
constexpr cj_index kDilationH = 1, kDilationW = 1;
constexpr cj_index kPadTop = 1, kPadLeft = 1;
constexpr cj_index kXElements = 2592, kWElements = 288, kYElements = 1600;

// Element offsets: x and y by (n, row, col, channel) in NCHW memory order, w by
// (kh, kw, i, o) in HWIO order.
CJ_DEVICE cj_index x_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 1296 + row * 9 + col * 1 + c * 81;
}
CJ_DEVICE cj_index y_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 800 + row * 5 + col * 1 + c * 25;
}
CJ_DEVICE cj_index w_offset(cj_index kh, cj_index kw, cj_index i, cj_index o) {
  return kh * 96 + kw * 32 + i * 32 + o;
}

CJ_DEVICE acc_t to_acc(elem_t v) { return cj_half_to_float(v); }
CJ_DEVICE elem_t from_acc(acc_t v) { return cj_float_to_half(v); }

// Depthwise input gradient: 16 channels x 16 pixels per block, the filter taps of the block's channels in shared memory.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(256, 2) cuda_sm80_f16_bwd_data_dw_nchw_dw_c16p16(cj_args args) {
  elem_t* __restrict__ x = static_cast<elem_t*>(args.x);
  const elem_t* __restrict__ w = static_cast<const elem_t*>(args.w);
  const elem_t* __restrict__ y = static_cast<const elem_t*>(args.y);
  constexpr cj_index kChannels = 16, kMultiplier = 2, kPixels = 162;
  CJ_SHARED(acc_t, filter_tile, 288);  // [kh][kw][channel in block][multiplier]
  const int tid = threadIdx.x;
  const cj_index c0 = cj_index(blockIdx.y) * 16;
  for (int e = tid; e < 288; e += 256) {
    const int m = e % 2, cl = (e / 2) % 16, tap = e / 32;
    const cj_index c = c0 + cl;
    CJ_STS(filter_tile, e, c < kChannels ? to_acc(CJ_LDG(w, tap * kOutC + c * 2 + m)) : acc_t(0));
  }
  __syncthreads();
  const int cl = tid % 16;
  const cj_index c = c0 + cl;
  const cj_index pixel = cj_index(blockIdx.x) * 16 + tid / 16;
  if (c >= kChannels || pixel >= kPixels) return;
  const cj_index col = pixel % kInW, row = (pixel / kInW) % kInH, n = pixel / (kInW * kInH);
  acc_t acc = 0;
  for (cj_index kh = 0; kh < kKH; ++kh) {
    const cj_index th = row + kPadTop - kh * kDilationH;
    if (th < 0 || th % kStrideH != 0 || th / kStrideH >= kOutH) continue;
    for (cj_index kw = 0; kw < kKW; ++kw) {
      const cj_index tw = col + kPadLeft - kw * kDilationW;
      if (tw < 0 || tw % kStrideW != 0 || tw / kStrideW >= kOutW) continue;
      const cj_index dy_base = y_offset(n, th / kStrideH, tw / kStrideW, c * 2);
      const int tap_base = ((kh * kKW + kw) * 16 + cl) * 2;
      CJ_UNROLL
      for (int m = 0; m < 2; ++m) {
        acc = cj_fma(to_acc(CJ_LDG(y, dy_base + m * 25)), CJ_LDS(filter_tile, tap_base + m), acc);
      }
    }
  }
  CJ_STG(x, x_offset(n, row, col, c), from_acc(acc));
}
