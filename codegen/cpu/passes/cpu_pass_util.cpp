#include "codegen/cpu/passes/cpu_pass_util.hpp"

#include <algorithm>

namespace convjit::cpu {

using namespace ir;

Stmt sum_partials(LoopNest& nest, int pb, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  const int dw = nest.buffer_of_kind(BufferKind::kW);
  const std::int64_t extents[4] = {p.kh, p.kw, p.filter_in, p.oc};
  const char* names[4] = {"rkh", "rkw", "ri", "ro"};
  Affine v[4];
  Loop root;
  Loop* cur = nullptr;
  for (int d = 0; d < 4; ++d) {
    Loop l;
    l.var = nest.new_var(names[d]);
    l.end = extents[d];
    v[d] = Affine::var(l.var);
    if (cur == nullptr) {
      root = std::move(l);
      cur = &root;
    } else {
      cur->body.push_back(Stmt{std::move(l)});
      cur = &std::get<Loop>(cur->body.back().node);
    }
  }
  Loop sum;
  sum.var = nest.new_var("rc");
  sum.begin = 1;
  sum.end = chunks;
  Store add;
  add.dst = Access{pb, {Affine::constant_of(0), v[0], v[1], v[2], v[3]}};
  add.has_src = true;
  add.src = Access{pb, {Affine::var(sum.var), v[0], v[1], v[2], v[3]}};
  add.accumulate = true;
  sum.body.push_back(Stmt{std::move(add)});
  cur->body.push_back(Stmt{std::move(sum)});
  Store out;
  out.dst = Access{dw, {v[0], v[1], v[2], v[3]}};
  out.has_src = true;
  out.src = Access{pb, {Affine::constant_of(0), v[0], v[1], v[2], v[3]}};
  cur->body.push_back(Stmt{std::move(out)});
  return Stmt{std::move(root)};
}

int add_partial_buffer(LoopNest& nest, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  Buffer partial;
  partial.name = "partial";
  partial.kind = BufferKind::kScratch;
  partial.role = BufferRole::kPartialSums;
  partial.dtype = accumulator_dtype(p.dtype);
  partial.dims = {chunks, p.kh, p.kw, p.filter_in, p.oc};
  const std::int64_t filter = p.kh * p.kw * p.filter_in * p.oc;
  partial.strides = {filter, p.kw * p.filter_in * p.oc, p.filter_in * p.oc, p.oc, 1};
  return nest.add_buffer(std::move(partial));
}

}  // namespace convjit::cpu
