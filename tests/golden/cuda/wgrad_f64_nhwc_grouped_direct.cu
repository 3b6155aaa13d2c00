// kernel cuda_sm80_f64_bwd_filter_nhwc_direct_t128
// workspace 0
// tensors 800 384 768 w
// launch cuda_sm80_f64_bwd_filter_nhwc_direct_t128 1 1 1 128 1 1 0
// 
// convjit CUDA kernel cuda_sm80_f64_bwd_filter_nhwc_direct_t128
// problem: direction=backprop_filter depthwise=false dtype=float64 format=NHWC n=1 ih=5 iw=5 ic=4 kh=2 kw=2 filter_in=2 oc=6 groups=2 oh=4 ow=4 strides=[1,1] dilations=[1,1] pads=[0,0,0,0]
// plan:    target=sm_80 algo=direct math=f64 threads=128 splitk=1 smem=0 workspace=0
// Generated for this problem only: every size and stride is a constant.

typedef double elem_t;  // the tensors' element type
typedef double acc_t;  // the accumulation type
typedef int cj_index;  // element offsets

constexpr cj_index kBatch = 1;
constexpr cj_index kInH = 5, kInW = 5, kInC = 4;  // x
constexpr cj_index kKH = 2, kKW = 2, kFilterIn = 2, kOutC = 6;  // w (HWIO)
constexpr cj_index kGroups = 2, kOutCPerGroup = 3;
constexpr cj_index kOutH = 4, kOutW = 4;  // y
constexpr cj_index kStrideH = 1, kStrideW = 1;
constexpr cj_index kDilationH = 1, kDilationW = 1;
constexpr cj_index kPadTop = 0, kPadLeft = 0;
constexpr cj_index kXElements = 100, kWElements = 48, kYElements = 96;

// Element offsets: x and y by (n, row, col, channel) in NHWC memory order, w by
// (kh, kw, i, o) in HWIO order.
CJ_DEVICE cj_index x_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 100 + row * 20 + col * 4 + c * 1;
}
CJ_DEVICE cj_index y_offset(cj_index n, cj_index row, cj_index col, cj_index c) {
  return n * 96 + row * 24 + col * 6 + c * 1;
}
CJ_DEVICE cj_index w_offset(cj_index kh, cj_index kw, cj_index i, cj_index o) {
  return kh * 24 + kw * 12 + i * 6 + o;
}

CJ_DEVICE acc_t to_acc(elem_t v) { return v; }
CJ_DEVICE elem_t from_acc(acc_t v) { return v; }

// One thread per w element (grid-stride loop), the reduction in registers.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(128, 2) cuda_sm80_f64_bwd_filter_nhwc_direct_t128(cj_args args) {
  const elem_t* __restrict__ x = static_cast<const elem_t*>(args.x);
  elem_t* __restrict__ w = static_cast<elem_t*>(args.w);
  const elem_t* __restrict__ y = static_cast<const elem_t*>(args.y);
  for (cj_index e = cj_index(blockIdx.x) * 128 + threadIdx.x; e < 48; e += cj_index(gridDim.x) * 128) {
    acc_t acc = 0;
    const cj_index o = e % kOutC;
    cj_index rest = e / kOutC;
    const cj_index i = rest % kFilterIn;
    rest /= kFilterIn;
    const cj_index kw = rest % kKW;
    const cj_index kh = rest / kKW;
    const cj_index c = (o / kOutCPerGroup) * kFilterIn + i;
    for (cj_index n = 0; n < kBatch; ++n) {
      for (cj_index oh = 0; oh < kOutH; ++oh) {
        const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;
        if (ih < 0 || ih >= kInH) continue;
        for (cj_index ow = 0; ow < kOutW; ++ow) {
          const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;
          if (iw < 0 || iw >= kInW) continue;
          acc = cj_fma(to_acc(CJ_LDG(x, x_offset(n, ih, iw, c))),
                       to_acc(CJ_LDG(y, y_offset(n, oh, ow, o))), acc);
        }
      }
    }
    CJ_STG(w, e, from_acc(acc));
  }
}
