// Register tiling. The innermost (row loop, column loop, 1x1 tile) nest becomes rows x cols
// tiles: cols a multiple of the vector lanes along the contiguous channel (or W for NCHW),
// rows as many as the accumulators and operands leave registers for. Leftover rows get a
// remainder tile, leftover channels a tail tile whose cols is not a multiple of the lanes
// (backends mask it). The shape comes from the cost model in tile_model.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"
#include "codegen/cpu/tile_model.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

std::int64_t flat_coef(const LoopNest& nest, const Access& a, VarId v, bool* ok) {
  Affine off;
  if (!flatten_access(nest, a, &off)) {
    *ok = false;
    return 0;
  }
  return off.coef_of(v);
}

// Reduction points of one tile (the product of its reduce trip counts).
std::int64_t reduce_points(const Tile& t) {
  std::int64_t k = 1;
  for (const ReduceLoop& r : t.reduce) {
    k *= r.end > r.begin ? (r.end - r.begin + r.step - 1) / r.step : 0;
  }
  return k;
}

class RegisterTile {
 public:
  RegisterTile(LoopNest& nest, const CpuPlan& plan)
      : nest_(nest), model_(plan.tiles), whole_width_rows_(plan.whole_width_rows) {
    // An output the plan streams takes tiles whose rows write whole lines: their columns then
    // come in whole lines where the extent allows (NCHW rows of 112 floats: 48 + 48 + 16
    // rather than 40 + 40 + 32).
    if (plan.whole_line_output_tiles) {
      line_output_ = output_buffer(nest);
      line_elements_ = CpuInfo::kCacheLineBytes /
                       dtype_size(nest.buffers[static_cast<std::size_t>(line_output_)].dtype);
    }
  }

  void stmts(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l == nullptr) {
        out.push_back(std::move(s));
        continue;
      }
      if (Tile* t = single_tile(*l)) {
        tile(nullptr, *l, *t, &out);  // a column loop alone
      } else if (l->body.size() == 1 && std::holds_alternative<Loop>(l->body[0].node) &&
                 single_tile(std::get<Loop>(l->body[0].node)) != nullptr) {
        Loop& c = std::get<Loop>(l->body[0].node);
        tile(l, c, *single_tile(c), &out);
      } else if (!distribute(*l, &out)) {
        stmts(l->body);
        out.push_back(std::move(s));
      }
    }
    body = std::move(out);
  }

 private:
  static Tile* single_tile(Loop& l) {
    if (l.body.size() != 1) return nullptr;
    Tile* t = std::get_if<Tile>(&l.body[0].node);
    return t != nullptr && t->rows == 1 && t->cols == 1 ? t : nullptr;
  }

  // A row loop around several column loops (border peeling split the W loop into parts):
  // distributed into one row loop per part, each tiled on its own, when some part then gets
  // rows. The parts write disjoint outputs and read only inputs, so the order is free.
  bool distribute(Loop& l, std::vector<Stmt>* out) {
    if (l.body.size() < 2) return false;
    for (Stmt& s : l.body) {
      auto* c = std::get_if<Loop>(&s.node);
      if (c == nullptr || single_tile(*c) == nullptr) return false;
    }
    std::vector<Stmt> parts;
    bool rows = false;
    for (const Stmt& s : l.body) {
      Loop r = loop_header(l);
      r.body = {s};
      Loop& c = std::get<Loop>(r.body[0].node);
      rows = tile(&r, c, *single_tile(c), &parts) > 1 || rows;
    }
    if (!rows) return false;
    out->insert(out->end(), std::make_move_iterator(parts.begin()),
                std::make_move_iterator(parts.end()));
    return true;
  }

  // Rows an elementwise (depthwise) tile may take when its rows are `row_stride` elements
  // apart: the plan's tile model's limit, the stride taken in the widest element the tile
  // streams (a 16-bit depthwise tile reads dy from an f32 copy, widen_depthwise_operands,
  // whose rows are twice as far apart as dx's).
  std::int64_t elementwise_row_limit(const Tile& t, std::int64_t row_stride) const {
    int elem_bytes = 0;
    for (const Access* a : {&t.a, &t.b, &t.c}) {
      elem_bytes = std::max(elem_bytes,
                            dtype_size(nest_.buffers[static_cast<std::size_t>(a->buffer)].dtype));
    }
    return model_.elementwise_row_limit(row_stride * elem_bytes);
  }

  // Tiles the (row loop, column loop) pair and returns the rows chosen.
  std::int64_t tile(const Loop* r, const Loop& c, Tile t, std::vector<Stmt>* out) {
    bool ok = true;
    // Columns: one operand a vector along the loop with the other constant (outer product),
    // or both vectors (elementwise: depthwise channels). c is contiguous along it, or strided
    // (a stride residue's W positions in the outer product, the channels of a depth
    // multiplier's filter gradient in the elementwise form): its lanes are written once per
    // tile, after the whole reduction.
    TileForm form = TileForm::kNone;
    const std::int64_t cc = c.step == 1 ? flat_coef(nest_, t.c, c.var, &ok) : 0;
    if (cc >= 1) {
      const std::int64_t ca = flat_coef(nest_, t.a, c.var, &ok);
      const std::int64_t cb = flat_coef(nest_, t.b, c.var, &ok);
      if (ok && ca == 1 && cb == 0) std::swap(t.a, t.b);  // NCHW: the activation is the vector
      if (ok && ((ca == 0 && cb == 1) || (ca == 1 && cb == 0))) form = TileForm::kOuterProduct;
      if (ok && ca == 1 && cb == 1) form = TileForm::kElementwise;
    }
    // Rows: the b operand (reused across rows) must not depend on the row loop. In the
    // elementwise form, and in a single column (a border column of a W-vector tile, whose
    // rows are channels), either operand may play b.
    bool row_ok = false;
    if (r != nullptr && r->step == 1) {
      const std::int64_t rb = flat_coef(nest_, t.b, r->var, &ok);
      const std::int64_t ra = flat_coef(nest_, t.a, r->var, &ok);
      const bool either = form == TileForm::kElementwise || form == TileForm::kNone;
      if (ok && rb != 0 && ra == 0 && either) std::swap(t.a, t.b);
      row_ok = ok && (rb == 0 || (ra == 0 && either));
      // An outer product whose vector moves with the rows and whose broadcast does not (the
      // NCHW depthwise tile over rows of H: dy's rows, one filter tap for all): each row
      // reads its own vectors against one shared broadcast, the elementwise tile's pattern
      // with a broadcast for the shared operand. Rows then share each tap's broadcast and
      // the reduction's loop overhead, which a 14-wide plane cannot spread over its columns.
      if (ok && form == TileForm::kOuterProduct && rb != 0 && ra == 0) {
        std::swap(t.a, t.b);
        form = TileForm::kElementwise;
        row_ok = true;
      }
    }
    const std::int64_t row_extent = row_ok ? r->trip_count() : 1;
    const std::int64_t col_extent = form != TileForm::kNone ? c.trip_count() : 1;
    const std::int64_t granule = cc == 1 && t.c.buffer == line_output_ ? line_elements_ : 1;
    TileShape shape = model_.choose(form, row_extent, col_extent, reduce_points(t), granule);
    if (form == TileForm::kElementwise && row_ok) {
      const std::int64_t limit = elementwise_row_limit(t, flat_coef(nest_, t.c, r->var, &ok));
      if (shape.rows > limit) {
        shape =
            model_.choose(form, std::min(row_extent, limit), col_extent, reduce_points(t), granule);
      }
    }
    // Depthwise rows of the whole width, W's borders still guarded (the plan's
    // whole_width_rows): one vector of channels (a whole line where the output is streamed),
    // as many rows as W has positions; the x86 emitter takes them in groups its registers hold
    // and skips the taps past the borders.
    if (whole_width_rows_ && form == TileForm::kElementwise && row_ok &&
        nest_.role_of(r->var) == VarRole::kInCol && guards_var(t, r->var)) {
      shape.rows = row_extent;
      shape.cols = std::min(col_extent, std::max(model_.lanes(), granule));
    }
    const std::int64_t rows = shape.rows, cols = shape.cols;
    if (rows == 1 && cols == 1) {
      if (r != nullptr) {
        out->push_back(Stmt{*r});
      } else {
        out->push_back(Stmt{c});
      }
      return 1;
    }
    if (r == nullptr || rows == 1) {
      std::vector<Stmt> parts = col_parts(c, t, 1, cols);
      if (r == nullptr) {
        out->insert(out->end(), parts.begin(), parts.end());
      } else {
        Loop copy = loop_header(*r);
        copy.body = std::move(parts);
        out->push_back(Stmt{std::move(copy)});
      }
      return rows;
    }
    const std::int64_t main_end = r->begin + r->trip_count() / rows * rows;
    if (main_end > r->begin) out->push_back(Stmt{row_part(*r, r->begin, main_end, rows, "", c, t, cols)});
    if (main_end < r->end) {
      out->push_back(Stmt{row_part(*r, main_end, r->end, r->end - main_end, "rows tail", c, t, cols)});
    }
    return rows;
  }

  Loop row_part(const Loop& r, std::int64_t b, std::int64_t e, std::int64_t rows, const char* tag,
                const Loop& c, Tile t, std::int64_t cols) {
    Loop part;
    part.var = r.var;
    part.begin = b;
    part.end = e;
    part.step = rows;
    part.kind = r.kind;
    part.label = join(r.label, tag);
    substitute(t, r.var, Affine::var(r.var) + Affine::var(t.row_var));
    part.body = col_parts(c, t, rows, cols);
    return part;
  }

  std::vector<Stmt> col_parts(const Loop& c, Tile t, std::int64_t rows, std::int64_t cols) const {
    substitute(t, c.var, Affine::var(c.var) + Affine::var(t.col_var));
    t.rows = rows;
    std::vector<Stmt> out;
    const std::int64_t main_end = c.begin + c.trip_count() / cols * cols;
    auto emit = [&](std::int64_t b, std::int64_t e, std::int64_t n, const char* tag) {
      Loop part;
      part.var = c.var;
      part.begin = b;
      part.end = e;
      part.step = n;
      part.kind = c.kind;
      part.label = join(c.label, tag);
      Tile tt = t;
      tt.cols = n;
      part.body.push_back(Stmt{std::move(tt)});
      out.push_back(Stmt{std::move(part)});
    };
    if (main_end > c.begin) emit(c.begin, main_end, cols, "");
    if (main_end < c.end) {
      // A tail of part of a vector is stored masked (vmaskmovps on AVX2, slow on AMD). A
      // tile that only writes its output can instead end on the last whole vector that fits,
      // overlapping columns the main tiles already wrote with the same values (14-wide NCHW
      // rows: 8 columns, then 8 from column 6, instead of 8 and a masked 6).
      const std::int64_t lanes = model_.lanes();
      const std::int64_t whole = (c.end - main_end + lanes - 1) / lanes * lanes;
      if ((c.end - main_end) % lanes != 0 && c.trip_count() >= whole && rewrites_only(t) &&
          nest_.problem.direction != ConvDirection::kBackpropFilter) {
        emit(c.end - whole, c.end, whole, "cols tail, overlapping");
      } else {
        emit(main_end, c.end, c.end - main_end, "cols tail");
      }
    }
    return out;
  }

  // Whether running the tile twice over the same outputs gives what running it once does:
  // it overwrites its outputs (no accumulation) and reads nothing it writes. (A filter
  // gradient's tiles are still plain here; block_reduction makes them accumulate later.)
  static bool rewrites_only(const Tile& t) {
    return !t.accumulate && !t.paired && t.a.buffer != t.c.buffer && t.b.buffer != t.c.buffer;
  }

  static std::string join(const std::string& label, const char* tag) {
    if (*tag == 0) return label;
    return label.empty() ? std::string(tag) : fmt::format("{}, {}", label, tag);
  }

  static bool guards_var(const Tile& t, VarId var) {
    return std::any_of(t.guards.begin(), t.guards.end(),
                       [&](const Guard& g) { return g.expr.numer.coef_of(var) != 0; });
  }

  LoopNest& nest_;
  TileModel model_;
  bool whole_width_rows_ = false;
  int line_output_ = -1;            // the output whose tiles should write whole lines
  std::int64_t line_elements_ = 1;  // its elements per cache line
};

}  // namespace

LoopNest register_tile(LoopNest nest, const CpuPlan& plan) {
  RegisterTile(nest, plan).stmts(nest.body);
  return nest;
}

}  // namespace convjit::cpu
