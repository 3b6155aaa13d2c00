#include "codegen/cuda/cuda_gemm_shape.hpp"

#include <algorithm>
#include <numeric>

namespace convjit::codegen {

ResidueAxis residue_axis(std::int64_t in, std::int64_t k, std::int64_t stride,
                         std::int64_t dilation, std::int64_t pad, std::int64_t residue) {
  ResidueAxis a;
  a.residue = residue;
  a.first = ((residue - pad) % stride + stride) % stride;
  a.count = a.first < in ? (in - a.first + stride - 1) / stride : 0;
  a.tap_step = stride / std::gcd(dilation, stride);
  a.taps = 0;
  for (std::int64_t t = 0; t < k; ++t) {
    if (((t * dilation - residue) % stride + stride) % stride != 0) continue;
    if (a.taps == 0) a.tap0 = t;
    ++a.taps;
  }
  if (a.taps > 0) {
    // first + pad = residue (mod stride) and tap0 * dilation = residue (mod stride): exact.
    const std::int64_t num = a.first + pad - a.tap0 * dilation;
    a.out0 = num / stride;  // exact, so truncation is floor
    a.out_step = a.tap_step * dilation / stride;
  }
  return a;
}

std::vector<ResidueClass> residue_classes(const ConvProblem& p) {
  std::vector<ResidueClass> classes;
  for (std::int64_t rh = 0; rh < p.stride_h; ++rh) {
    const ResidueAxis h = residue_axis(p.ih, p.kh, p.stride_h, p.dilation_h, p.pad_top, rh);
    if (h.count == 0) continue;
    for (std::int64_t rw = 0; rw < p.stride_w; ++rw) {
      const ResidueAxis w = residue_axis(p.iw, p.kw, p.stride_w, p.dilation_w, p.pad_left, rw);
      if (w.count == 0) continue;
      classes.push_back({h, w});
    }
  }
  return classes;
}

GemmShape gemm_shape(const ConvProblem& p) {
  GemmShape g;
  switch (p.direction) {
    case ConvDirection::kForward:
      g.m = p.n * p.oh * p.ow;
      g.n = p.oc_per_group();
      g.k = p.kh * p.kw * p.filter_in;
      break;
    case ConvDirection::kBackpropData:
      g.n = p.filter_in;
      for (const ResidueClass& c : residue_classes(p)) {
        g.m = std::max(g.m, c.m(p));
        g.k = std::max(g.k, c.k(p));
      }
      break;
    case ConvDirection::kBackpropFilter:
      g.m = p.kh * p.kw * p.filter_in;
      g.n = p.oc_per_group();
      g.k = p.n * p.oh * p.ow;
      break;
  }
  return g;
}

}  // namespace convjit::codegen
