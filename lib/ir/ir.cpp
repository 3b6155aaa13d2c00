// Affine arithmetic (kept in normal form: terms sorted by var, no zero coefficients) and the
// small helpers of the loop-nest IR.
#include "ir/ir.hpp"

namespace convjit::ir {
namespace {

// Merges two sorted term lists, scaling the second by `k`, dropping zero coefficients and
// the terms of x on `skip` (substitution drops the variable it replaces).
TermList merge_terms(const TermList& x, const TermList& y, std::int64_t k, VarId skip = -1) {
  TermList out;
  std::size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    if (i < x.size() && x[i].var == skip) {
      ++i;
    } else if (j == y.size() || (i < x.size() && x[i].var < y[j].var)) {
      out.push_back(x[i++]);
    } else if (i == x.size() || y[j].var < x[i].var) {
      if (y[j].coef * k != 0) out.push_back({y[j].var, y[j].coef * k});
      ++j;
    } else {
      const std::int64_t c = x[i].coef + y[j].coef * k;
      if (c != 0) out.push_back({x[i].var, c});
      ++i;
      ++j;
    }
  }
  return out;
}

}  // namespace

Affine Affine::var(VarId v, std::int64_t coef) {
  Affine a;
  if (coef != 0) a.terms.push_back({v, coef});
  return a;
}

std::int64_t Affine::coef_of(VarId v) const {
  for (const Term& t : terms) {
    if (t.var == v) return t.coef;
  }
  return 0;
}

Affine Affine::operator+(const Affine& o) const {
  return Affine{merge_terms(terms, o.terms, 1), constant + o.constant};
}

Affine Affine::operator-(const Affine& o) const {
  return Affine{merge_terms(terms, o.terms, -1), constant - o.constant};
}

Affine Affine::operator*(std::int64_t k) const {
  if (k == 0) return constant_of(0);
  Affine out{terms, constant * k};
  for (Term& t : out.terms) t.coef *= k;
  return out;
}

Affine Affine::operator+(std::int64_t c) const { return Affine{terms, constant + c}; }

Affine Affine::substitute(VarId v, const Affine& replacement) const {
  const std::int64_t c = coef_of(v);
  if (c == 0) return *this;
  // One merge of the other terms with c * replacement, no intermediate Affines.
  return Affine{merge_terms(terms, replacement.terms, c, v), constant + c * replacement.constant};
}

std::int64_t Buffer::elements() const {
  std::int64_t e = 1;
  for (std::int64_t d : dims) e *= d;
  return e;
}

VarId LoopNest::new_var(std::string name, VarRole role) {
  var_names.push_back(std::move(name));
  var_roles.push_back(role);
  return static_cast<VarId>(var_names.size() - 1);
}

int LoopNest::buffer_of_role(BufferRole role) const {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role == role) return static_cast<int>(i);
  }
  return -1;
}

int LoopNest::add_buffer(Buffer b) {
  buffers.push_back(std::move(b));
  return static_cast<int>(buffers.size() - 1);
}

int LoopNest::buffer_of_kind(BufferKind kind) const {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].kind == kind) return static_cast<int>(i);
  }
  return -1;
}

std::int64_t LoopNest::scratch_bytes() const {
  std::int64_t bytes = 0;
  for (const Buffer& b : buffers) {
    if (b.kind == BufferKind::kScratch) bytes += b.elements() * dtype_size(b.dtype);
  }
  return bytes;
}

bool flatten_access(const LoopNest& nest, const Access& access, Affine* offset) {
  const Buffer& buf = nest.buffers.at(static_cast<std::size_t>(access.buffer));
  Affine out;
  for (std::size_t d = 0; d < access.index.size(); ++d) {
    if (access.index[d].divisor != 1) return false;
    out = out + access.index[d].numer * buf.strides[d];
  }
  *offset = std::move(out);
  return true;
}

DType accumulator_dtype(DType dtype) {
  return dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}

}  // namespace convjit::ir
