// Border columns tiled over rows (backprop data and the forward op, NHWC, channel vectors).
// border_peel splits each image row into its left border columns, the interior and its right
// border columns; a border column is a W loop of one position, so register_tile sees a row
// loop of one iteration and gives each of its pixels a tile of one row: a few accumulators,
// bound by the FMA latency and loading a filter vector per FMA. On 14- and 7-wide images (the
// deep layers of ResNet-50 and VGG16) those pixels are a seventh to two-sevenths of all. The
// border column's pixels of all the rows between the top and bottom borders take the same
// taps, so they can be one column of pixels down H instead: the H loop is distributed over the
// row's parts, and in each border part the one-position W loop is replaced by its value,
// leaving H as the row loop right around the channel loop, which register_tile then gives
// rows.
#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// A loop over one column loop that holds one untiled tile: what register_tile makes rows and
// columns of.
bool is_column_loop(const Stmt& s) {
  const auto* l = std::get_if<Loop>(&s.node);
  if (l == nullptr || l->body.size() != 1) return false;
  const auto* t = std::get_if<Tile>(&l->body[0].node);
  return t != nullptr && t->rows == 1 && t->cols == 1;
}

// A single-position loop (a peeled border column) right around a column loop.
bool is_border_column(const Stmt& s) {
  const auto* l = std::get_if<Loop>(&s.node);
  return l != nullptr && l->trip_count() == 1 && l->body.size() == 1 &&
         is_column_loop(l->body[0]);
}

// Loops and tiles only: no copy or other store whose order with the tiles could matter.
bool tiles_only(const Stmt& s) {
  if (std::holds_alternative<Tile>(s.node)) return true;
  const auto* l = std::get_if<Loop>(&s.node);
  return l != nullptr && std::all_of(l->body.begin(), l->body.end(), tiles_only);
}

class BorderColumnsAsRows {
 public:
  explicit BorderColumnsAsRows(const LoopNest& nest) : nest_(nest) {}

  int columns() const { return columns_; }

  void stmts(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l != nullptr && distribute(*l, &out)) continue;
      if (l != nullptr) stmts(l->body);
      out.push_back(std::move(s));
    }
    body = std::move(out);
  }

 private:
  // `h`: a loop over H rows of several parts, some of them border columns. Each part gets an
  // H loop of its own (the parts write disjoint outputs and only read inputs, so their order
  // is free); a border column's gets its column loop with the W position substituted.
  bool distribute(const Loop& h, std::vector<Stmt>* out) {
    // The output's H and W: X's for the data gradient, Y's for the forward op.
    const VarRole row = nest_.role_of(h.var);
    if (h.trip_count() < 2 || h.step != 1 || h.body.size() < 2 ||
        (row != VarRole::kInRow && row != VarRole::kOutRow) ||
        !std::all_of(h.body.begin(), h.body.end(), tiles_only) ||
        !std::any_of(h.body.begin(), h.body.end(), is_border_column)) {
      return false;
    }
    const VarRole col = row == VarRole::kInRow ? VarRole::kInCol : VarRole::kOutCol;
    for (const Stmt& part : h.body) {
      if (is_border_column(part) && nest_.role_of(std::get<Loop>(part.node).var) != col) {
        return false;
      }
    }
    for (const Stmt& part : h.body) {
      Loop rows = loop_header(h);
      if (is_border_column(part)) {
        const Loop& w = std::get<Loop>(part.node);
        rows.body = w.body;
        substitute(rows.body, w.var, Affine::constant_of(w.begin));
        ++columns_;
      } else {
        rows.body.push_back(part);
      }
      out->push_back(Stmt{std::move(rows)});
    }
    return true;
  }

  const LoopNest& nest_;
  int columns_ = 0;
};

}  // namespace

LoopNest border_columns_as_rows(LoopNest nest, const CpuPlan& plan) {
  if (!plan.border_columns_as_rows) return nest;
  BorderColumnsAsRows pass(nest);
  pass.stmts(nest.body);
  nest.derived["border_columns_as_rows"] = pass.columns();
  return nest;
}

}  // namespace convjit::cpu
