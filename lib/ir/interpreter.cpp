// The IR interpreter. Before running, every statement is translated once into a form with its
// affine expressions flattened to (offset, coefficient) lists over a flat variable array, so
// the per-element work is a few multiply-adds and no allocation.
#include "ir/interpreter.hpp"

#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "convjit/numeric.hpp"

namespace convjit::ir {
namespace {

struct Lin {
  std::int64_t constant = 0;
  std::vector<std::pair<VarId, std::int64_t>> terms;

  explicit Lin(const Affine& a = {}) : constant(a.constant) {
    for (const Term& t : a.terms) terms.emplace_back(t.var, t.coef);
  }
  std::int64_t eval(const std::int64_t* vars) const {
    std::int64_t s = constant;
    for (const auto& [v, c] : terms) s += c * vars[v];
    return s;
  }
};

// Floor-free exact division check: returns false when `divisor` does not divide `numer`.
inline bool exact_div(std::int64_t numer, std::int64_t divisor, std::int64_t* q) {
  if (divisor == 1) {
    *q = numer;
    return true;
  }
  if (numer % divisor != 0) return false;
  *q = numer / divisor;
  return true;
}

struct CAccess {
  int buffer = 0;
  bool flat = true;
  Lin offset;                                   // when flat
  std::vector<std::pair<Lin, std::int64_t>> dims;  // numerator, divisor (when not flat)
  std::vector<std::int64_t> strides;

  // Only called where the guards hold, so every division is exact.
  std::int64_t eval(const std::int64_t* vars) const {
    if (flat) return offset.eval(vars);
    std::int64_t off = 0;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      off += dims[d].first.eval(vars) / dims[d].second * strides[d];
    }
    return off;
  }
};

struct CGuard {
  Lin numer;
  std::int64_t divisor = 1, lo = 0, hi = 0;
  bool holds(const std::int64_t* vars) const {
    std::int64_t q = 0;
    return exact_div(numer.eval(vars), divisor, &q) && q >= lo && q < hi;
  }
};

struct CStmt;
struct CLoop {
  VarId var = 0;
  std::int64_t begin = 0, end = 0, step = 1;
  bool parallel = false;
  std::vector<CStmt> body;
};
struct CTile {
  VarId row_var = 0, col_var = 0;
  std::int64_t rows = 1, cols = 1;
  std::vector<ReduceLoop> reduce;
  std::vector<CGuard> guards;
  CAccess a, b, c;
  bool accumulate = false;
  bool paired = false;
  CAccess a2, b2;
};
struct CStore {
  CAccess dst, src;
  bool has_src = false, accumulate = false;
};
struct CStmt {
  std::variant<CLoop, CTile, CStore> node;
};

struct Buf {
  DType dtype = DType::kFloat32;
  void* data = nullptr;
};

template <typename T>
inline T load(const Buf& b, std::int64_t i) {
  switch (b.dtype) {
    case DType::kFloat32: return static_cast<T>(static_cast<const float*>(b.data)[i]);
    case DType::kFloat64: return static_cast<T>(static_cast<const double*>(b.data)[i]);
    case DType::kHalf: return static_cast<T>(half_to_float(static_cast<const std::uint16_t*>(b.data)[i]));
    case DType::kBFloat16:
      return static_cast<T>(bfloat16_to_float(static_cast<const std::uint16_t*>(b.data)[i]));
  }
  return T(0);
}

template <typename T>
inline void store(const Buf& b, std::int64_t i, T v) {
  switch (b.dtype) {
    case DType::kFloat32: static_cast<float*>(b.data)[i] = static_cast<float>(v); return;
    case DType::kFloat64: static_cast<double*>(b.data)[i] = static_cast<double>(v); return;
    case DType::kHalf:
      static_cast<std::uint16_t*>(b.data)[i] = float_to_half(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      static_cast<std::uint16_t*>(b.data)[i] = float_to_bfloat16(static_cast<float>(v));
      return;
  }
}

class Interpreter {
 public:
  Interpreter(const LoopNest& nest, const ParallelFor& pf) : nest_(nest), pf_(pf) {}

  Status run(const OperandPointers& ops) {
    for (const Buffer& b : nest_.buffers) {
      Buf buf{b.dtype, nullptr};
      switch (b.kind) {
        case BufferKind::kX: buf.data = ops.x; break;
        case BufferKind::kW: buf.data = ops.w; break;
        case BufferKind::kY: buf.data = ops.y; break;
        case BufferKind::kScratch: {
          const auto bytes = static_cast<std::size_t>(b.elements() * dtype_size(b.dtype));
          scratch_.push_back(std::make_unique<unsigned char[]>(bytes ? bytes : 1));
          // Scratch holds nothing until the kernel writes it (the backends do not clear it):
          // all-ones bytes are a NaN in every dtype, so a read before the write shows.
          std::memset(scratch_.back().get(), 0xFF, bytes);
          buf.data = scratch_.back().get();
          break;
        }
      }
      if (buf.data == nullptr && b.elements() > 0) {
        return internal_error(fmt::format("interpreter: no data for buffer {}", b.name));
      }
      bufs_.push_back(buf);
    }
    std::vector<CStmt> body;
    for (const Stmt& s : nest_.body) body.push_back(compile(s));
    std::vector<std::int64_t> vars(nest_.var_names.size() + 1, 0);
    const bool wide = accumulator_dtype(nest_.problem.dtype) == DType::kFloat64;
    if (wide) {
      exec_list<double>(body, vars.data(), false);
    } else {
      exec_list<float>(body, vars.data(), false);
    }
    return Status::ok();
  }

 private:
  CAccess compile(const Access& a) const {
    CAccess out;
    out.buffer = a.buffer;
    Affine flat;
    if (flatten_access(nest_, a, &flat)) {
      out.offset = Lin(flat);
      return out;
    }
    out.flat = false;
    out.strides = nest_.buffers[static_cast<std::size_t>(a.buffer)].strides;
    for (const IndexExpr& e : a.index) out.dims.emplace_back(Lin(e.numer), e.divisor);
    return out;
  }

  CStmt compile(const Stmt& s) const {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      CLoop c{l->var, l->begin, l->end, l->step, l->kind == LoopKind::kParallel, {}};
      for (const Stmt& b : l->body) c.body.push_back(compile(b));
      return CStmt{std::move(c)};
    }
    if (const auto* t = std::get_if<Tile>(&s.node)) {
      CTile c;
      c.row_var = t->row_var;
      c.col_var = t->col_var;
      c.rows = t->rows;
      c.cols = t->cols;
      c.reduce = t->reduce;
      for (const Guard& g : t->guards) c.guards.push_back({Lin(g.expr.numer), g.expr.divisor, g.lo, g.hi});
      c.a = compile(t->a);
      c.b = compile(t->b);
      c.c = compile(t->c);
      c.accumulate = t->accumulate;
      c.paired = t->paired;
      if (t->paired) {
        c.a2 = compile(t->a2);
        c.b2 = compile(t->b2);
      }
      return CStmt{std::move(c)};
    }
    const auto& st = std::get<Store>(s.node);
    CStore c;
    c.dst = compile(st.dst);
    c.has_src = st.has_src;
    if (st.has_src) c.src = compile(st.src);
    c.accumulate = st.accumulate;
    return CStmt{std::move(c)};
  }

  template <typename T>
  void exec_list(const std::vector<CStmt>& body, std::int64_t* vars, bool in_parallel) {
    for (const CStmt& s : body) {
      if (const auto* l = std::get_if<CLoop>(&s.node)) {
        exec_loop<T>(*l, vars, in_parallel);
      } else if (const auto* t = std::get_if<CTile>(&s.node)) {
        exec_tile<T>(*t, vars);
      } else {
        exec_store<T>(std::get<CStore>(s.node), vars);
      }
    }
  }

  template <typename T>
  void exec_loop(const CLoop& l, std::int64_t* vars, bool in_parallel) {
    const std::int64_t trips = l.end > l.begin ? (l.end - l.begin + l.step - 1) / l.step : 0;
    if (l.parallel && !in_parallel && trips > 1) {
      // Each chunk gets its own copy of the variables; iterations are independent by contract.
      const std::vector<std::int64_t> base(vars, vars + nest_.var_names.size() + 1);
      pf_(trips, [&](std::int64_t b, std::int64_t e) {
        std::vector<std::int64_t> local = base;
        for (std::int64_t it = b; it < e; ++it) {
          local[static_cast<std::size_t>(l.var)] = l.begin + it * l.step;
          exec_list<T>(l.body, local.data(), true);
        }
      });
      return;
    }
    for (std::int64_t v = l.begin; v < l.end; v += l.step) {
      vars[l.var] = v;
      exec_list<T>(l.body, vars, in_parallel);
    }
  }

  template <typename T>
  T reduce_at(const CTile& t, std::size_t level, std::int64_t* vars, T acc) const {
    if (level == t.reduce.size()) {
      for (const CGuard& g : t.guards) {
        if (!g.holds(vars)) return acc;
      }
      acc += load<T>(bufs_[t.a.buffer], t.a.eval(vars)) * load<T>(bufs_[t.b.buffer], t.b.eval(vars));
      if (t.paired) {
        acc += load<T>(bufs_[t.a2.buffer], t.a2.eval(vars)) *
               load<T>(bufs_[t.b2.buffer], t.b2.eval(vars));
      }
      return acc;
    }
    const ReduceLoop& r = t.reduce[level];
    for (std::int64_t k = r.begin; k < r.end; k += r.step) {
      vars[r.var] = k;
      acc = reduce_at<T>(t, level + 1, vars, acc);
    }
    return acc;
  }

  template <typename T>
  void exec_tile(const CTile& t, std::int64_t* vars) {
    const Buf& c = bufs_[t.c.buffer];
    for (std::int64_t r = 0; r < t.rows; ++r) {
      vars[t.row_var] = r;
      for (std::int64_t v = 0; v < t.cols; ++v) {
        vars[t.col_var] = v;
        const std::int64_t off = t.c.eval(vars);
        T acc = t.accumulate ? load<T>(c, off) : T(0);
        acc = reduce_at<T>(t, 0, vars, acc);
        store<T>(c, off, acc);
      }
    }
  }

  template <typename T>
  void exec_store(const CStore& s, std::int64_t* vars) {
    const Buf& d = bufs_[s.dst.buffer];
    const std::int64_t off = s.dst.eval(vars);
    if (!s.has_src) {
      store<T>(d, off, T(0));
      return;
    }
    // Values pass through double so that an f64 partial sum is never narrowed on the way.
    const double src = load<double>(bufs_[s.src.buffer], s.src.eval(vars));
    const double v = s.accumulate ? load<double>(d, off) + src : src;
    store<double>(d, off, v);
  }

  const LoopNest& nest_;
  const ParallelFor& pf_;
  std::vector<Buf> bufs_;
  std::vector<std::unique_ptr<unsigned char[]>> scratch_;
};

}  // namespace

Status interpret(const LoopNest& nest, const OperandPointers& operands, const ParallelFor& parallel_for) {
  return Interpreter(nest, parallel_for).run(operands);
}

}  // namespace convjit::ir
