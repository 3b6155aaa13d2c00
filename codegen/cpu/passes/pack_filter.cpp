// Filter packing (backprop data, NHWC). W is HWIO, so along the input channel the tile
// vectorizes over its stride is OC. Copying it once per call into [kh][kw][oc][i] makes each
// (tap, output channel) row of input channels contiguous, and every group's slice with it.
// A 16-bit filter that the target multiplies in float32 (f16 always, bf16 without
// avx512_bf16's dot product) is widened in the same copy: the tiles then load plain float32
// vectors, or take them as FMA memory operands, instead of widening every vector at every
// reduction point (two extra vector ops each, on the pipes the FMAs need). The widening is
// exact, so the results are the same bit for bit.
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest pack_filter(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  const int w = nest.buffer_of_kind(BufferKind::kW);
  if (!plan.pack_filter || w < 0) return nest;
  Buffer packed;
  packed.name = "wp";
  packed.kind = BufferKind::kScratch;
  packed.role = BufferRole::kPackedFilter;
  packed.dtype = plan.packed_filter_dtype;
  packed.dims = {p.kh, p.kw, p.oc, p.filter_in};
  packed.strides = {p.kw * p.oc * p.filter_in, p.oc * p.filter_in, p.filter_in, 1};
  const int wp = nest.add_buffer(std::move(packed));

  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    for (Access* a : {&t.a, &t.b}) {
      if (a->buffer != w) continue;
      a->buffer = wp;
      a->index = {a->index[0], a->index[1], a->index[3], a->index[2]};
    }
  });

  // The copy runs first: for kh, kw, oc, i: wp[kh, kw, oc, i] = w[kh, kw, i, oc].
  Stmt copy = copy_nest(
      nest, {p.kh, p.kw, p.oc, p.filter_in}, {"pkh", "pkw", "po", "pi"}, wp, w,
      [](const std::vector<Affine>& v) { return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]}; },
      [](const std::vector<Affine>& v) { return std::vector<IndexExpr>{v[0], v[1], v[3], v[2]}; });
  nest.body.insert(nest.body.begin(), std::move(copy));
  return nest;
}

}  // namespace convjit::cpu
