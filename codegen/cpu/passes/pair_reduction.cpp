// Reduction pairs for bfloat16 backprop data (NHWC, packed filter) on CPUs with avx512_bf16.
// `vdpbf16ps` multiplies pairs of bfloat16 values and adds both products to one f32 lane, at
// twice the FMA rate: acc[v] += a[2k]*b[2k][v] + a[2k+1]*b[2k+1][v]. The pair must sit in one
// 32-bit word of each operand:
//   - a = dy[.., o], o contiguous, so dy[o], dy[o+1] already form a word: a {1to16} broadcast;
//   - b = the packed filter, whose [..][o][i] rows are re-packed as [..][o/2][i][2] (the two
//     output channels of a pair side by side for every input channel).
// The innermost reduce loop (over o) then counts pairs and each tile becomes a paired tile
// (ir.hpp). The packing copies write both members of each pair. All tiles read the one
// packed filter, so the pass applies to all of them or to none: an odd number of output
// channels (or a tile in any other form) keeps the widening f32 path.
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

/// `e` / 2, or false when some coefficient or the constant is odd.
bool halve(const Affine& e, Affine* out) {
  if (e.constant % 2 != 0) return false;
  Affine h = Affine::constant_of(e.constant / 2);
  for (const Term& t : e.terms) {
    if (t.coef % 2 != 0) return false;
    h.terms.push_back({t.var, t.coef / 2});
  }
  *out = std::move(h);
  return true;
}

/// The packed filter's pair form of tile `t`, or false when `t` is not of the form this pass
/// rewrites: b = wp[.., o + even, i..] with o the innermost reduce loop (step 1, an even trip
/// count), a one element further per o and b's other indices independent of o.
bool pair_tile(const LoopNest& nest, int wp, Tile* t) {
  if (t->paired || t->b.buffer != wp || t->a.buffer == wp || t->reduce.empty()) return false;
  const ReduceLoop& o = t->reduce.back();
  for (const Guard& g : t->guards) {
    if (g.expr.numer.coef_of(o.var) != 0) return false;
  }
  const std::size_t od = nest.buffers[static_cast<std::size_t>(wp)].dims.size() - 2;
  if (o.step != 1 || (o.end - o.begin) % 2 != 0 || t->b.index.size() != od + 2) return false;
  Affine a_flat;
  if (!flatten_access(nest, t->a, &a_flat) || a_flat.coef_of(o.var) != 1) return false;
  for (std::size_t d = 0; d < t->b.index.size(); ++d) {
    const IndexExpr& e = t->b.index[d];
    if (e.divisor != 1 || e.numer.coef_of(o.var) != (d == od ? 1 : 0)) return false;
  }
  // o = begin + 2*o': the pair's first member; b's channel index halves.
  const Affine first = Affine::var(o.var, 2) + o.begin;
  Affine half_channel;
  if (!halve(t->b.index[od].numer.substitute(o.var, first), &half_channel)) return false;

  Tile p = *t;
  substitute(p, o.var, first);
  p.b.index[od] = IndexExpr(half_channel);
  p.a2 = t->a;
  p.b2 = p.b;
  for (IndexExpr& e : p.a2.index) e.numer = e.numer.substitute(o.var, first + 1);
  p.b.index.push_back(IndexExpr(Affine::constant_of(0)));
  p.b2.index.push_back(IndexExpr(Affine::constant_of(1)));
  p.reduce.back() = ReduceLoop{o.var, 0, (o.end - o.begin) / 2, 1};
  p.paired = true;
  *t = std::move(p);
  return true;
}

/// The two members' copies of a pair as one loop chain storing both members of a pair side
/// by side, when each member is the same chain of loops around one store: the emitter then
/// moves each pair as one 32-bit element (a transpose of dwords), where two separate loops of
/// 16-bit stores went element by element at about 4 cycles each (a quarter to a third of a
/// 1x1 input gradient's time on 8x7x7 images, 128 or 2048 output channels to 512, one thread).
/// Otherwise the members stay two loops.
std::vector<Stmt> merge_pair_members(std::vector<Stmt> members) {
  if (members.size() != 2) return members;
  Stmt merged = members[0];
  Stmt* a = &merged;
  const Stmt* b = &members[1];
  Loop* innermost = nullptr;
  while (auto* la = std::get_if<Loop>(&a->node)) {
    const auto* lb = std::get_if<Loop>(&b->node);
    if (lb == nullptr || la->body.size() != 1 || lb->body.size() != 1 || la->var != lb->var ||
        la->begin != lb->begin || la->end != lb->end || la->step != lb->step) {
      return members;
    }
    innermost = la;
    a = &la->body[0];
    b = &lb->body[0];
  }
  const auto* second = std::get_if<Store>(&b->node);
  if (innermost == nullptr || !std::holds_alternative<Store>(a->node) || second == nullptr) {
    return members;
  }
  innermost->body.push_back(Stmt{*second});
  return {std::move(merged)};
}

/// Rewrites the packing copies into `wp` for the pair layout: the loop over output channels
/// `o` runs over pairs, its body once per member with o = 2*o' + member, each store writing
/// [.., o', i.., member] (both members' stores in one loop where they can be). Returns the
/// number of loops rewritten.
int pair_packing(std::vector<Stmt>& body, int wp, std::size_t od) {
  int rewritten = 0;
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) continue;
    bool writes_channel = false;
    for (const Stmt& inner : l->body) {
      const Stmt* leaf = &inner;
      while (const auto* il = std::get_if<Loop>(&leaf->node)) {
        if (il->body.size() != 1) break;
        leaf = &il->body[0];
      }
      const auto* st = std::get_if<Store>(&leaf->node);
      writes_channel = writes_channel ||
                       (st != nullptr && st->dst.buffer == wp &&
                        st->dst.index[od].numer == Affine::var(l->var));
    }
    if (!writes_channel) {
      rewritten += pair_packing(l->body, wp, od);
      continue;
    }
    std::vector<Stmt> members;
    for (std::int64_t member = 0; member < 2; ++member) {
      std::vector<Stmt> copy = l->body;
      substitute(copy, l->var, Affine::var(l->var, 2) + member);
      std::function<void(std::vector<Stmt>&)> mark = [&](std::vector<Stmt>& stmts) {
        for (Stmt& c : stmts) {
          if (auto* cl = std::get_if<Loop>(&c.node)) {
            mark(cl->body);
          } else if (auto* st = std::get_if<Store>(&c.node); st != nullptr && st->dst.buffer == wp) {
            st->dst.index[od] = IndexExpr(Affine::var(l->var));
            st->dst.index.push_back(IndexExpr(Affine::constant_of(member)));
          }
        }
      };
      mark(copy);
      for (Stmt& c : copy) members.push_back(std::move(c));
    }
    l->begin /= 2;
    l->end /= 2;
    l->body = merge_pair_members(std::move(members));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace

LoopNest pair_reduction(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.pair_output_channels) return nest;
  int wp = -1;
  for (std::size_t b = 0; b < nest.buffers.size(); ++b) {
    if (nest.buffers[b].role == BufferRole::kPackedFilter) wp = static_cast<int>(b);
  }
  if (wp < 0) return nest;
  Buffer& packed = nest.buffers[static_cast<std::size_t>(wp)];
  const std::size_t od = packed.dims.size() - 2;  // [.., o, i]
  if (packed.dims[od] != p.oc || packed.strides[od] != packed.dims[od + 1] ||
      packed.strides[od + 1] != 1) {
    return nest;
  }

  LoopNest paired = nest;
  bool all = true, any = false;
  for_each_tile(paired.body, {}, [&](Tile& t, const VarRanges&) {
    if (t.a.buffer != wp && t.b.buffer != wp) return;
    any = true;
    all = all && pair_tile(paired, wp, &t);
  });
  if (!any || !all) return nest;
  // Every packing copy loops over the output channels once: [0, OC) becomes [0, OC/2).
  if (pair_packing(paired.body, wp, od) == 0) return nest;

  Buffer& wpp = paired.buffers[static_cast<std::size_t>(wp)];
  const std::int64_t cols = wpp.dims[od + 1];
  wpp.dims[od] = p.oc / 2;
  wpp.dims.push_back(2);
  wpp.strides[od] = 2 * cols;
  wpp.strides[od + 1] = 2;
  wpp.strides.push_back(1);
  return paired;
}

}  // namespace convjit::cpu
