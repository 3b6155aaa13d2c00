// The terms of an Affine, held inline up to a handful and on the heap beyond. Schedule passes
// and the x86 emitter build, copy and substitute indices for every tile of a nest; with the
// terms in a std::vector, allocation was about a quarter of compile time.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace convjit::ir {

/// Index of a loop variable in LoopNest::var_names.
using VarId = int;

struct Term {
  VarId var = 0;
  std::int64_t coef = 0;
  friend bool operator==(const Term&, const Term&) = default;
};

/// A vector of Terms (the subset of std::vector's interface the IR uses). Indices hold two or
/// three terms and a flattened offset up to about nine; kInline covers nearly all of them.
class TermList {
 public:
  using value_type = Term;
  using iterator = Term*;
  using const_iterator = const Term*;
  static constexpr std::size_t kInline = 8;

  TermList() = default;
  TermList(std::initializer_list<Term> terms) {
    for (const Term& t : terms) push_back(t);
  }
  TermList(const TermList& o) { append(o); }
  TermList(TermList&& o) noexcept : heap_(std::move(o.heap_)) {
    if (heap_.empty()) append(o);  // inline terms are copied; a heap block changes hands
    o.clear();
  }
  TermList& operator=(const TermList& o) {
    if (this != &o) {
      clear();
      append(o);
    }
    return *this;
  }
  TermList& operator=(TermList&& o) noexcept {
    if (this != &o) {
      clear();
      heap_ = std::move(o.heap_);
      if (heap_.empty()) append(o);
      o.clear();
    }
    return *this;
  }

  std::size_t size() const { return heap_.empty() ? size_ : heap_.size(); }
  bool empty() const { return size() == 0; }
  Term* data() { return heap_.empty() ? inline_.data() : heap_.data(); }
  const Term* data() const { return heap_.empty() ? inline_.data() : heap_.data(); }
  Term* begin() { return data(); }
  Term* end() { return data() + size(); }
  const Term* begin() const { return data(); }
  const Term* end() const { return data() + size(); }
  Term& operator[](std::size_t i) { return data()[i]; }
  const Term& operator[](std::size_t i) const { return data()[i]; }

  void clear() {
    heap_.clear();
    size_ = 0;
  }

  void push_back(const Term& t) {
    if (heap_.empty()) {
      if (size_ < kInline) {
        inline_[size_++] = t;
        return;
      }
      heap_.assign(inline_.begin(), inline_.begin() + size_);
      size_ = 0;
    }
    heap_.push_back(t);
  }

  friend bool operator==(const TermList& a, const TermList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void append(const TermList& o) {
    for (const Term& t : o) push_back(t);
  }

  // Inline terms are [0, size_) of inline_ while heap_ is empty; otherwise heap_ holds all.
  std::size_t size_ = 0;
  std::array<Term, kInline> inline_;
  std::vector<Term> heap_;
};

}  // namespace convjit::ir
