// The IR's text form. Deterministic and stable: the pass tests compare it verbatim.
#include "ir/printer.hpp"

#include <fmt/format.h>

namespace convjit::ir {
namespace {

std::string_view kind_text(BufferKind k) {
  switch (k) {
    case BufferKind::kX: return "X";
    case BufferKind::kW: return "W";
    case BufferKind::kY: return "Y";
    case BufferKind::kScratch: return "scratch";
  }
  return "?";
}

std::string_view loop_kind_text(LoopKind k) {
  switch (k) {
    case LoopKind::kSerial: return "";
    case LoopKind::kParallel: return " parallel";
    case LoopKind::kUnrolled: return " unrolled";
    case LoopKind::kVectorized: return " vectorized";
  }
  return "";
}

std::string join_ints(const std::vector<std::int64_t>& v) {
  return fmt::format("{}", fmt::join(v, ", "));
}

class Printer {
 public:
  explicit Printer(const LoopNest& nest) : nest_(nest) {}

  std::string index(const IndexExpr& e) const {
    if (e.divisor == 1) return print(e.numer, nest_);
    return fmt::format("({}) / {}", print(e.numer, nest_), e.divisor);
  }

  std::string access(const Access& a) const {
    std::string out = nest_.buffers.at(static_cast<std::size_t>(a.buffer)).name + "[";
    for (std::size_t i = 0; i < a.index.size(); ++i) {
      if (i) out += ", ";
      out += index(a.index[i]);
    }
    return out + "]";
  }

  std::string range(std::int64_t b, std::int64_t e, std::int64_t s) const {
    return s == 1 ? fmt::format("[{}, {})", b, e) : fmt::format("[{}, {}) step {}", b, e, s);
  }

  static std::string next_block(const char* what, std::int64_t distance) {
    return distance != 0 ? fmt::format("{} {}", what, distance) : "";
  }

  void stmts(const std::vector<Stmt>& body, int depth) {
    for (const Stmt& s : body) stmt(s, depth);
  }

  void stmt(const Stmt& s, int depth) {
    const std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
    if (const auto* loop = std::get_if<Loop>(&s.node)) {
      out_ += fmt::format("{}for {} in {}{}{}:\n", pad, var(loop->var),
                          range(loop->begin, loop->end, loop->step), loop_kind_text(loop->kind),
                          loop->label.empty() ? "" : fmt::format(" \"{}\"", loop->label));
      stmts(loop->body, depth + 1);
    } else if (const auto* t = std::get_if<Tile>(&s.node)) {
      out_ += fmt::format("{}tile {}:{} x {}:{}{}{}{}{}\n", pad, var(t->row_var), t->rows,
                          var(t->col_var), t->cols, t->stream ? " stream" : "",
                          t->prefetch_next_rows ? " prefetch" : "",
                          next_block(" prefetch_block_a", t->prefetch_next_block_a),
                          next_block(" prefetch_block_b", t->prefetch_next_block_b));
      if (!t->reduce.empty()) {
        out_ += pad + "  reduce";
        for (const ReduceLoop& r : t->reduce) {
          out_ += fmt::format(" {} in {}", var(r.var), range(r.begin, r.end, r.step));
        }
        out_ += "\n";
      }
      for (const Guard& g : t->guards) {
        out_ += fmt::format("{}  guard {} <= {} < {}\n", pad, g.lo, index(g.expr), g.hi);
      }
      out_ += fmt::format("{}  {} {} {} * {}{}\n", pad, access(t->c), t->accumulate ? "+=" : "=",
                          access(t->a), access(t->b),
                          t->paired ? fmt::format(" + {} * {}", access(t->a2), access(t->b2)) : "");
    } else if (const auto* st = std::get_if<Store>(&s.node)) {
      out_ += fmt::format("{}store {} {} {}{}\n", pad, access(st->dst), st->accumulate ? "+=" : "=",
                          st->has_src ? access(st->src) : "0", st->stream ? " stream" : "");
    }
  }

  std::string var(VarId v) const {
    return v >= 0 && static_cast<std::size_t>(v) < nest_.var_names.size()
               ? nest_.var_names[static_cast<std::size_t>(v)]
               : fmt::format("v{}", v);
  }

  std::string run() {
    const ConvProblem& p = nest_.problem;
    out_ += fmt::format("kernel {} {} {}", direction_name(p.direction), dtype_name(p.dtype),
                        data_format_name(p.format));
    if (!nest_.schedule_summary.empty()) out_ += fmt::format(" \"{}\"", nest_.schedule_summary);
    out_ += "\n";
    for (const Buffer& b : nest_.buffers) {
      out_ += fmt::format("buffer {} {} {} dims [{}] strides [{}]\n", b.name, kind_text(b.kind),
                          dtype_name(b.dtype), join_ints(b.dims), join_ints(b.strides));
    }
    stmts(nest_.body, 0);
    return std::move(out_);
  }

 private:
  const LoopNest& nest_;
  std::string out_;
};

}  // namespace

std::string print(const Affine& expr, const LoopNest& nest) {
  Printer p(nest);
  std::string out;
  for (const Term& t : expr.terms) {
    const std::int64_t mag = t.coef < 0 ? -t.coef : t.coef;
    if (out.empty()) {
      out += t.coef < 0 ? "-" : "";
    } else {
      out += t.coef < 0 ? " - " : " + ";
    }
    out += mag == 1 ? p.var(t.var) : fmt::format("{}*{}", mag, p.var(t.var));
  }
  if (out.empty()) return fmt::format("{}", expr.constant);
  if (expr.constant > 0) out += fmt::format(" + {}", expr.constant);
  if (expr.constant < 0) out += fmt::format(" - {}", -expr.constant);
  return out;
}

std::string print(const LoopNest& nest) { return Printer(nest).run(); }

}  // namespace convjit::ir
