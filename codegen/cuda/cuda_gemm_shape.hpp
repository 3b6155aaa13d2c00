// Each op as an implicit GEMM: its M x N x K, and for the input gradient the stride-residue
// classes that make it dense (every input position of one class shares one tap set, so no
// multiply touches an inserted zero).
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/problem.hpp"

namespace convjit::codegen {

/// C[M x N] = sum over K of A[M x K] * B[K x N], per group.
///   forward:  M = N*OH*OW,  N = OC/G, K = KH*KW*IC/G   (A = x gathered, B = w, C = y)
///   dgrad:    M = N*(input positions of one residue class), N = IC/G,
///             K = OC/G * (taps of that class)          (A = dy gathered, B = w, C = x)
///   wgrad:    M = KH*KW*IC/G, N = OC/G, K = N*OH*OW     (A = x gathered, B = dy, C = w)
/// For dgrad, M and K here are those of the largest class (the plan's view).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};
GemmShape gemm_shape(const ConvProblem& problem);

/// One spatial axis of an input-gradient residue class r (0 <= r < stride): the input
/// positions i with (i + pad) % stride == r, i = first + j*stride for j < count, and the taps
/// k = tap0 + t*tap_step (t < taps) with k*dilation = r (mod stride). For those,
/// out = (i + pad - k*dilation) / stride = j + out0 - t*out_step exactly.
struct ResidueAxis {
  std::int64_t residue = 0;
  std::int64_t first = 0, count = 0;
  std::int64_t tap0 = 0, tap_step = 1, taps = 0;
  std::int64_t out0 = 0, out_step = 0;
};
ResidueAxis residue_axis(std::int64_t in, std::int64_t k, std::int64_t stride,
                         std::int64_t dilation, std::int64_t pad, std::int64_t residue);

/// Every residue class of a dgrad problem, rows (h) major; classes without input positions
/// are left out (they own nothing to write).
struct ResidueClass {
  ResidueAxis h, w;
  std::int64_t m(const ConvProblem& p) const { return p.n * h.count * w.count; }
  std::int64_t k(const ConvProblem& p) const { return p.oc_per_group() * h.taps * w.taps; }
};
std::vector<ResidueClass> residue_classes(const ConvProblem& problem);

}  // namespace convjit::codegen
