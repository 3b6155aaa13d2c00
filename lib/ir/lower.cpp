// Lowering: the direct form of each op. Every output element is one 1x1 Tile whose reduce
// loops run over the taps/channels (or, for the filter gradient, the spatial positions) and
// whose guards carry the bounds, the padding and, for the data gradient's gather form, the
// stride divisibility. The schedule passes make it fast; this form only has to be right.
#include "ir/lower.hpp"

#include <array>

namespace convjit::ir {
namespace {

// Builds one LoopNest; channel loops of extent 1 are left out (their variable is the constant
// 0) so that the innermost remaining loop is the one worth vectorizing.
class Lowerer {
 public:
  explicit Lowerer(const ConvProblem& p) : p_(p) { nest_.problem = p; }

  LoopNest run() {
    add_buffers();
    if (p_.is_empty()) {
      zero_fill();
    } else {
      switch (p_.direction) {
        case ConvDirection::kForward: forward(); break;
        case ConvDirection::kBackpropData: backprop_data(); break;
        case ConvDirection::kBackpropFilter: backprop_filter(); break;
      }
    }
    return std::move(nest_);
  }

 private:
  struct Dim {
    const char* name;
    std::int64_t extent;
    bool optional;  // left out (as the constant 0) when its extent is 1
    VarRole role;
  };

  static std::vector<std::int64_t> to_vec(const std::array<std::int64_t, 4>& a) {
    return {a.begin(), a.end()};
  }

  void add_buffer(TensorRole role, BufferKind kind, const char* name) {
    Buffer b;
    b.name = name;
    b.kind = kind;
    b.dtype = p_.dtype;
    if (role == TensorRole::kW) {
      b.dims = {p_.kh, p_.kw, p_.filter_in, p_.oc};
    } else if (role == TensorRole::kX) {
      b.dims = {p_.n, p_.ih, p_.iw, p_.ic};
    } else {
      b.dims = {p_.n, p_.oh, p_.ow, p_.oc};
    }
    b.strides = to_vec(p_.strides(role));
    nest_.add_buffer(std::move(b));
  }

  void add_buffers() {
    const bool fwd = p_.direction == ConvDirection::kForward;
    const bool data = p_.direction == ConvDirection::kBackpropData;
    const bool filt = p_.direction == ConvDirection::kBackpropFilter;
    x_ = 0;
    w_ = 1;
    y_ = 2;
    add_buffer(TensorRole::kX, BufferKind::kX, data ? "dx" : "x");
    add_buffer(TensorRole::kW, BufferKind::kW, filt ? "dw" : "w");
    add_buffer(TensorRole::kY, BufferKind::kY, fwd ? "y" : "dy");
  }

  // Opens the loops for `dims` (outer first) under `body` and returns the innermost body and,
  // per dim, its value (a variable or the constant 0).
  std::vector<Stmt>* open_loops(std::vector<Stmt>* body, const std::vector<Dim>& dims,
                                std::vector<Affine>* values) {
    std::size_t kept = 0;
    for (const Dim& d : dims) kept += !(d.optional && d.extent == 1);
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const Dim& d = dims[i];
      // Keep at least one loop so every nest has a loop to schedule.
      if (d.optional && d.extent == 1 && !(kept == 0 && i + 1 == dims.size())) {
        values->push_back(Affine::constant_of(0));
        continue;
      }
      Loop loop;
      loop.var = nest_.new_var(d.name, d.role);
      loop.end = d.extent;
      values->push_back(Affine::var(loop.var));
      body->push_back(Stmt{std::move(loop)});
      body = &std::get<Loop>(body->back().node).body;
    }
    return body;
  }

  ReduceLoop reduce(const char* name, std::int64_t extent, VarRole role) {
    ReduceLoop r;
    r.var = nest_.new_var(name, role);
    r.end = extent;
    return r;
  }

  Tile make_tile() {
    if (row_var_ < 0) {
      row_var_ = nest_.new_var("r");
      col_var_ = nest_.new_var("v");
    }
    Tile t;
    t.row_var = row_var_;
    t.col_var = col_var_;
    return t;
  }

  static Access access(int buffer, std::vector<IndexExpr> idx) { return Access{buffer, std::move(idx)}; }

  // Outer dims of an activation-indexed output (forward Y, backprop-data X) in memory order.
  std::vector<Dim> activation_dims(bool input, const char* h, std::int64_t eh, const char* w,
                                   std::int64_t ew, const char* c, std::int64_t ec) const {
    Dim n{"n", p_.n, false, VarRole::kBatch};
    Dim dh{h, eh, false, input ? VarRole::kInRow : VarRole::kOutRow};
    Dim dw{w, ew, false, input ? VarRole::kInCol : VarRole::kOutCol};
    Dim g{"g", p_.groups, true, VarRole::kGroup};
    Dim dc{c, ec, true, input ? VarRole::kInChannel : VarRole::kOutChannel};
    if (p_.format == DataFormat::kNCHW) return {n, g, dc, dh, dw};
    return {n, dh, dw, g, dc};
  }

  // Binds the values of activation_dims back to (n, h, w, g, c) whatever the format.
  std::array<Affine, 5> bind(const std::vector<Affine>& v) const {
    if (p_.format == DataFormat::kNCHW) return {v[0], v[3], v[4], v[1], v[2]};
    return {v[0], v[1], v[2], v[3], v[4]};
  }

  void forward() {
    std::vector<Affine> vals;
    std::vector<Stmt>* body = open_loops(
        &nest_.body, activation_dims(false, "oh", p_.oh, "ow", p_.ow, "o", p_.oc_per_group()), &vals);
    auto [n, oh, ow, g, o] = bind(vals);
    Tile t = make_tile();
    t.reduce = {reduce("kh", p_.kh, VarRole::kTapRow), reduce("kw", p_.kw, VarRole::kTapCol),
                reduce("i", p_.filter_in, VarRole::kInChannel)};
    const Affine kh = Affine::var(t.reduce[0].var), kw = Affine::var(t.reduce[1].var),
                 i = Affine::var(t.reduce[2].var);
    const Affine h = oh * p_.stride_h + kh * p_.dilation_h + (-p_.pad_top);
    const Affine w = ow * p_.stride_w + kw * p_.dilation_w + (-p_.pad_left);
    const Affine oc = g * p_.oc_per_group() + o;
    t.guards = {Guard{h, 0, p_.ih}, Guard{w, 0, p_.iw}};
    t.a = access(x_, {n, h, w, g * p_.filter_in + i});
    t.b = access(w_, {kh, kw, i, oc});
    t.c = access(y_, {n, oh, ow, oc});
    body->push_back(Stmt{std::move(t)});
  }

  void backprop_data() {
    std::vector<Affine> vals;
    std::vector<Stmt>* body = open_loops(
        &nest_.body, activation_dims(true, "ih", p_.ih, "iw", p_.iw, "i", p_.filter_in), &vals);
    auto [n, ih, iw, g, i] = bind(vals);
    Tile t = make_tile();
    t.reduce = {reduce("kh", p_.kh, VarRole::kTapRow), reduce("kw", p_.kw, VarRole::kTapCol),
                reduce("o", p_.oc_per_group(), VarRole::kOutChannel)};
    const Affine kh = Affine::var(t.reduce[0].var), kw = Affine::var(t.reduce[1].var),
                 o = Affine::var(t.reduce[2].var);
    // Gather form: the output position a tap reaches, exact only when the stride divides it.
    const IndexExpr oh(ih + p_.pad_top - kh * p_.dilation_h, p_.stride_h);
    const IndexExpr ow(iw + p_.pad_left - kw * p_.dilation_w, p_.stride_w);
    const Affine oc = g * p_.oc_per_group() + o;
    t.guards = {Guard{oh, 0, p_.oh}, Guard{ow, 0, p_.ow}};
    t.a = access(y_, {n, oh, ow, oc});
    t.b = access(w_, {kh, kw, i, oc});
    t.c = access(x_, {n, ih, iw, g * p_.filter_in + i});
    body->push_back(Stmt{std::move(t)});
  }

  void backprop_filter() {
    std::vector<Affine> vals;
    std::vector<Stmt>* body =
        open_loops(&nest_.body,
                   {{"kh", p_.kh, false, VarRole::kTapRow},
                    {"kw", p_.kw, false, VarRole::kTapCol},
                    {"g", p_.groups, true, VarRole::kGroup},
                    {"i", p_.filter_in, true, VarRole::kInChannel},
                    {"o", p_.oc_per_group(), true, VarRole::kOutChannel}},
                   &vals);
    const Affine &kh = vals[0], &kw = vals[1], &g = vals[2], &i = vals[3], &o = vals[4];
    Tile t = make_tile();
    t.reduce = {reduce("n", p_.n, VarRole::kBatch), reduce("oh", p_.oh, VarRole::kOutRow),
                reduce("ow", p_.ow, VarRole::kOutCol)};
    const Affine n = Affine::var(t.reduce[0].var), oh = Affine::var(t.reduce[1].var),
                 ow = Affine::var(t.reduce[2].var);
    const Affine h = oh * p_.stride_h + kh * p_.dilation_h + (-p_.pad_top);
    const Affine w = ow * p_.stride_w + kw * p_.dilation_w + (-p_.pad_left);
    const Affine oc = g * p_.oc_per_group() + o;
    t.guards = {Guard{h, 0, p_.ih}, Guard{w, 0, p_.iw}};
    t.a = access(x_, {n, h, w, g * p_.filter_in + i});
    t.b = access(y_, {n, oh, ow, oc});
    t.c = access(w_, {kh, kw, i, oc});
    body->push_back(Stmt{std::move(t)});
  }

  // An empty problem's output is all zeros (TensorFlow returns zeros; never leave it unset).
  void zero_fill() {
    const int out = p_.direction == ConvDirection::kForward        ? y_
                    : p_.direction == ConvDirection::kBackpropData ? x_
                                                                   : w_;
    const Buffer& buf = nest_.buffers[static_cast<std::size_t>(out)];
    static constexpr std::array<const char*, 4> kActNames = {"n", "h", "w", "c"};
    static constexpr std::array<const char*, 4> kFilterNames = {"kh", "kw", "i", "o"};
    std::vector<Affine> vals;
    std::vector<Dim> dims;
    for (std::size_t d = 0; d < 4; ++d) {
      dims.push_back({out == w_ ? kFilterNames[d] : kActNames[d], buf.dims[d], false,
                      VarRole::kOther});
    }
    std::vector<Stmt>* body = &nest_.body;
    bool any_zero = false;
    for (const Dim& d : dims) any_zero |= d.extent == 0;
    if (any_zero) return;  // nothing to write
    body = open_loops(body, dims, &vals);
    Store s;
    s.dst = access(out, {vals[0], vals[1], vals[2], vals[3]});
    body->push_back(Stmt{std::move(s)});
  }

  const ConvProblem& p_;
  LoopNest nest_;
  int x_ = 0, w_ = 1, y_ = 2;
  VarId row_var_ = -1, col_var_ = -1;
};

}  // namespace

LoopNest lower(const ConvProblem& problem) { return Lowerer(problem).run(); }

}  // namespace convjit::ir
