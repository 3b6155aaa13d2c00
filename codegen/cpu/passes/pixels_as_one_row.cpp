// Pixels as one row (forward and input gradient, 1x1 filter, stride 1, no padding): pixel
// (h, w) of one operand meets pixel (h, w) of the other and nothing else, so each image is a
// matrix product over its H*W pixels. The nest is lowered again for the same tensors viewed
// as one row of H*W pixels per image (H and W are dense together in NHWC and in NCHW), and
// every later pass tiles that row: the register tiles run down the whole image, with one tail
// per image instead of one per row. The first pass of such a schedule; it replaces the nest.
#include "codegen/cpu/passes/passes.hpp"
#include "ir/lower.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest pixels_as_one_row(LoopNest nest, const CpuPlan& plan) {
  if (!plan.pixels_as_one_row) return nest;
  return lower(one_row_problem(nest.problem));
}

}  // namespace convjit::cpu
