// Position vectors (backprop data). The lowered nest vectorizes the innermost loop: the input
// channel for NHWC, W for NCHW. Two shapes waste that:
//   - NCHW: rows over ih are impossible (dy moves with ih), so each dy vector feeds one FMA.
//     With the channel loop moved inside the row loop, rows run over input channels that all
//     share the dy vector along W; W is copied once per call to [i][o][kh][kw] so the taps
//     the reduction walks innermost are contiguous.
//   - NHWC with few input channels: a vector over 3 channels is mostly masked lanes. Moving
//     the channel loop inside the row loop as well makes W positions the vector and channels
//     the rows; dy, strided by OC along W, is copied once per call into a scratch laid out
//     [n][oh][oc][ow] so the vector along ow is contiguous (where the plan's cost model
//     prefers it, comparing both tiles plus the copy).
// The pass only reorders loops and swaps a buffer; residues, borders and tiles come later.

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// The chain of perfectly nested loops from `body` down to the tile; empty when the nest is not
// a single chain.
std::vector<Loop*> loop_chain(std::vector<Stmt>& body) {
  std::vector<Loop*> chain;
  std::vector<Stmt>* cur = &body;
  while (cur->size() == 1) {
    auto* l = std::get_if<Loop>(&(*cur)[0].node);
    if (l == nullptr) return std::holds_alternative<Tile>((*cur)[0].node) ? chain : std::vector<Loop*>{};
    chain.push_back(l);
    cur = &l->body;
  }
  return {};
}

}  // namespace

LoopNest position_vectors(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.position_vectors) return nest;
  const bool nchw = p.format == DataFormat::kNCHW;
  std::vector<Loop*> chain = loop_chain(nest.body);
  auto find = [&](VarRole role) {
    return std::find_if(chain.begin(), chain.end(),
                        [&](const Loop* l) { return nest.role_of(l->var) == role; });
  };
  // The channel loop exists only when there are several input channels per group.
  const auto ci = find(VarRole::kInChannel), hi = find(VarRole::kInRow),
             wi = find(VarRole::kInCol);
  if (ci == chain.end() || hi == chain.end() || wi == chain.end()) return nest;
  if (std::distance(chain.begin(), hi) > std::distance(chain.begin(), wi)) return nest;

  // Rebuild the chain's headers in the new order: the channel loop right before the W loop.
  std::vector<Loop> headers;
  for (Loop* l : chain) {
    if (l == *ci) continue;
    if (l == *wi) headers.push_back(**ci);
    headers.push_back(*l);
  }
  Stmt inner = std::move(chain.back()->body[0]);
  for (std::size_t d = headers.size(); d-- > 0;) {
    Loop l = std::move(headers[d]);
    l.body.clear();
    l.body.push_back(std::move(inner));
    inner = Stmt{std::move(l)};
  }
  nest.body.clear();
  nest.body.push_back(std::move(inner));
  {
    // Output channels outermost in the reduction: along the channel the W-contiguous dy
    // (NCHW, or the transposed scratch) steps a whole row or plane, so with the channel
    // innermost the tile's dy window (kh rows per channel) outgrows L1; taps innermost walk
    // along one dy row instead.
    for_each_tile(nest.body, {}, [](Tile& t, const VarRanges&) {
      if (!t.reduce.empty()) std::rotate(t.reduce.begin(), t.reduce.end() - 1, t.reduce.end());
    });
  }

  if (nchw) {
    // W (HWIO) through a scratch with the same logical dims laid out [i][o][kh][kw]: with the
    // taps innermost each row's broadcasts walk consecutive elements, where in HWIO the taps
    // are IC*OC apart and alias to one L1 set.
    const int w = nest.buffer_of_kind(BufferKind::kW);
    const std::int64_t kin = p.filter_in, kout = p.oc;
    const int wt = add_copy_scratch(nest, w,
                                    {"wt", BufferRole::kFilterCopy, p.dtype,
                                     {p.kw, 1, kout * p.kh * p.kw, p.kh * p.kw}});
    read_tiles_from(nest.body, w, wt);
    Stmt copy = copy_nest(nest, {kin, kout, p.kh, p.kw}, {"ti", "to", "tkh", "tkw"}, wt, w,
                          [](const std::vector<Affine>& v) {
                            return std::vector<IndexExpr>{v[2], v[3], v[0], v[1]};
                          });
    nest.body.insert(nest.body.begin(), std::move(copy));
  } else {
    // dy through a scratch of the same logical dims, with ow contiguous inside each (n, oh), in
    // the accumulator type: the copy widens 16-bit dy once, where the tiles would widen every
    // dy vector at every tap.
    const int y = nest.buffer_of_kind(BufferKind::kY);
    const int yt = add_copy_scratch(nest, y,
                                    {"dyt", BufferRole::kOutBackpropCopy, accumulator_dtype(p.dtype),
                                     {p.oh * p.oc * p.ow, p.oc * p.ow, 1, p.ow}});
    read_tiles_from(nest.body, y, yt);
    // for n, oh, o, ow: dyt[n, oh, ow, o] = dy[n, oh, ow, o] (ow innermost: contiguous stores).
    Stmt copy = copy_nest(nest, {p.n, p.oh, p.oc, p.ow}, {"tn", "toh", "to", "tow"}, yt, y,
                          [](const std::vector<Affine>& v) {
                            return std::vector<IndexExpr>{v[0], v[1], v[3], v[2]};
                          });
    nest.body.insert(nest.body.begin(), std::move(copy));
  }
  return nest;
}

}  // namespace convjit::cpu
