// Affine arithmetic keeps its normal form (sorted terms, no zero coefficients) and the helpers
// of the IR compute what they document.
#include <gtest/gtest.h>

#include "ir/ir.hpp"
#include "ir/printer.hpp"

namespace convjit::ir {
namespace {

TEST(IrAffine, ArithmeticKeepsNormalForm) {
  const Affine a = Affine::var(2, 3) + Affine::var(0) + 5;
  ASSERT_EQ(a.terms.size(), 2u);
  EXPECT_EQ(a.terms[0], (Term{0, 1}));
  EXPECT_EQ(a.terms[1], (Term{2, 3}));
  EXPECT_EQ(a.constant, 5);

  const Affine cancel = a - Affine::var(2, 3);
  EXPECT_EQ(cancel, Affine::var(0) + 5);
  EXPECT_EQ((a * 0), Affine::constant_of(0));
  EXPECT_EQ((a * -2).coef_of(2), -6);
  EXPECT_EQ((a * -2).constant, -10);
  EXPECT_EQ(a.coef_of(1), 0);
  EXPECT_TRUE(Affine::var(4, 0).is_constant());
}

TEST(IrAffine, SubstituteReplacesEveryOccurrence) {
  const Affine a = Affine::var(0, 2) + Affine::var(1, -1) + 7;  // 2x - y + 7
  const Affine r = Affine::var(1, 3) + 1;                       // x = 3y + 1
  const Affine s = a.substitute(0, r);                          // 5y + 9
  EXPECT_EQ(s, Affine::var(1, 5) + 9);
  EXPECT_EQ(a.substitute(3, r), a);
  // Substituting a variable by an expression that cancels it drops the term.
  EXPECT_EQ(a.substitute(1, Affine::var(0, 2)), Affine::constant_of(7));
}

TEST(IrAffine, FlattenAccessUsesStridesAndRefusesDivisors) {
  LoopNest nest;
  const VarId h = nest.new_var("h"), w = nest.new_var("w");
  const int b = nest.add_buffer(Buffer{"t", BufferKind::kScratch, DType::kFloat32, {4, 5}, {5, 1}});
  EXPECT_EQ(nest.buffers[static_cast<std::size_t>(b)].elements(), 20);
  EXPECT_EQ(nest.scratch_bytes(), 80);
  EXPECT_EQ(nest.buffer_of_kind(BufferKind::kScratch), b);
  EXPECT_EQ(nest.buffer_of_kind(BufferKind::kX), -1);
  Access acc{b, {Affine::var(h) + 1, Affine::var(w, 2)}};
  Affine off;
  ASSERT_TRUE(flatten_access(nest, acc, &off));
  EXPECT_EQ(off, Affine::var(h, 5) + Affine::var(w, 2) + 5);
  EXPECT_EQ(print(off, nest), "5*h + 2*w + 5");
  acc.index[0].divisor = 2;
  EXPECT_FALSE(flatten_access(nest, acc, &off));
  EXPECT_EQ(print(Affine::var(w, -1) + -3, nest), "-w - 3");
  EXPECT_EQ(print(Affine::constant_of(0), nest), "0");
}

// Terms past the inline capacity move to the heap and a cleared list takes terms inline again;
// copies and moves keep every term in both storages, and an Affine over more variables than
// fit inline still adds and substitutes exactly.
TEST(IrAffine, TermListKeepsTermsInlineAndOnTheHeap) {
  const std::size_t many = TermList::kInline + 3;
  TermList list;
  for (std::size_t i = 0; i < many; ++i)
    list.push_back({static_cast<VarId>(i), static_cast<std::int64_t>(i) + 1});
  ASSERT_EQ(list.size(), many);
  for (std::size_t i = 0; i < many; ++i)
    EXPECT_EQ(list[i], (Term{static_cast<VarId>(i), static_cast<std::int64_t>(i) + 1}));
  TermList copy = list;
  TermList moved = std::move(copy);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is cleared
  EXPECT_EQ(moved, list);
  // Cleared, the list is inline again: the survivors of a refill read back in order.
  list.clear();
  ASSERT_TRUE(list.empty());
  list.push_back({0, 1});
  list.push_back({static_cast<VarId>(many - 1), static_cast<std::int64_t>(many)});
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0], (Term{0, 1}));
  EXPECT_EQ(list[1], (Term{static_cast<VarId>(many - 1), static_cast<std::int64_t>(many)}));
  TermList small = {{3, 4}, {5, 6}};
  small = moved;
  EXPECT_EQ(small.size(), many);
  moved = TermList{{7, 8}};
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0], (Term{7, 8}));

  Affine wide;
  for (std::size_t i = 0; i < many; ++i) wide = wide + Affine::var(static_cast<VarId>(i), 2);
  const Affine sum = wide + Affine::var(0, -2) + 5;
  EXPECT_EQ(sum.terms.size(), many - 1);
  EXPECT_EQ(sum.coef_of(0), 0);
  EXPECT_EQ(sum.constant, 5);
  const Affine sub = wide.substitute(static_cast<VarId>(many - 1), Affine::var(0, 3) + 1);
  EXPECT_EQ(sub.terms.size(), many - 1);
  EXPECT_EQ(sub.coef_of(0), 8);  // 2 + 2*3
  EXPECT_EQ(sub.constant, 2);
}

TEST(IrAffine, AccumulatorDtypes) {
  EXPECT_EQ(accumulator_dtype(DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(accumulator_dtype(DType::kHalf), DType::kFloat32);
  EXPECT_EQ(accumulator_dtype(DType::kBFloat16), DType::kFloat32);
}

}  // namespace
}  // namespace convjit::ir
