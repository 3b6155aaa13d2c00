// The loop-nest IR (DESIGN.md section 3): buffers, loops with kinds, affine indices, the
// register-tile accumulate node and elementwise stores. Every bound and coefficient is a
// compile-time constant: one LoopNest describes exactly one ConvProblem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "convjit/types.hpp"
#include "frontend/problem.hpp"
#include "ir/term_list.hpp"

namespace convjit::ir {

/// sum(coef_i * var_i) + constant. Terms are kept sorted by var with no zero coefficients.
struct Affine {
  TermList terms;
  std::int64_t constant = 0;

  static Affine constant_of(std::int64_t c) { return Affine{{}, c}; }
  static Affine var(VarId v, std::int64_t coef = 1);
  std::int64_t coef_of(VarId v) const;
  bool is_constant() const { return terms.empty(); }
  Affine operator+(const Affine& o) const;
  Affine operator-(const Affine& o) const;
  Affine operator*(std::int64_t k) const;
  Affine operator+(std::int64_t c) const;
  /// Replaces `v` by `replacement` everywhere.
  Affine substitute(VarId v, const Affine& replacement) const;
  friend bool operator==(const Affine&, const Affine&) = default;
};

/// numer / divisor. Only meaningful when numer is divisible by divisor; a Guard that mentions
/// an IndexExpr with divisor > 1 also requires divisibility. The stride-residue pass removes
/// every divisor, after which all indices are affine.
struct IndexExpr {
  Affine numer;
  std::int64_t divisor = 1;
  IndexExpr() = default;
  IndexExpr(Affine a, std::int64_t d = 1) : numer(std::move(a)), divisor(d) {}  // NOLINT
  friend bool operator==(const IndexExpr&, const IndexExpr&) = default;
};

/// Holds when `expr` is exact (divisible) and lo <= expr < hi.
struct Guard {
  IndexExpr expr;
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  friend bool operator==(const Guard&, const Guard&) = default;
};

enum class BufferKind : std::uint8_t {
  kX,        // the op's X tensor (input activations / input gradient)
  kW,        // the op's W tensor (HWIO filter / filter gradient)
  kY,        // the op's Y tensor (output activations / out_backprop)
  kScratch,  // owned by the kernel: packed filter, per-chunk partial sums. Holds nothing at
             // the start of a run (backends do not clear it): a schedule that needs zeros
             // writes them itself, in the loops of the threads that use them.
};

/// What a buffer holds, set by whoever adds it (lowering for the op's tensors, the pass that
/// makes a scratch), so later passes find buffers by role, never by name.
enum class BufferRole : std::uint8_t {
  kTensor,        // one of the op's tensors (kind X, W or Y says which)
  kPackedFilter,  // the filter re-laid out for the tiles (pack_filter, pair_reduction)
  kFilterCopy,    // another copy of the filter (transposed, deinterleaved, widened, ...)
  kInputCopy,     // a copy of x the tiles read
  kInputByChannelCopy,  // a copy of x with each channel's pixels together (image pairs on AMX)
  kOutBackpropCopy,  // a copy of dy (or y) the tiles read
  kOutputCopy,    // where tiles write before a copy moves it into the op's output
  kPartialSums,   // per-chunk partial sums of a filter gradient, reduced at the end
};

/// What a loop variable walks, set where the variable is made (lowering, or the pass that makes
/// a loop), so passes find loops by role, never by name or label. A variable that replaces
/// another (a residue's quotient, a tap subset's index) keeps its role.
enum class VarRole : std::uint8_t {
  kOther,       // copies, fills, register-tile lanes, anything below
  kBatch,       // images
  kGroup,       // groups of a grouped or depthwise convolution
  kInRow,       // X's H (or its residue quotient)
  kInCol,       // X's W
  kInChannel,   // X's channel within a group
  kOutRow,      // Y's H
  kOutCol,      // Y's W
  kOutChannel,  // Y's channel within a group
  kTapRow,      // the filter's H
  kTapCol,      // the filter's W
  kThreads,     // one iteration per thread: a split of the work with private partial sums
  kRowChunk,    // chunks of output rows (the filter gradient's reduction blocking)
  kInChannelBlock,  // blocks of X's channels, each a slice of the packed filter (input gradients)
};

/// A tensor: logical dims and element strides. X and Y dims are always {n, h, w, c} whatever
/// the data format (the strides carry the layout); W dims are {kh, kw, i, o}.
struct Buffer {
  std::string name;
  BufferKind kind = BufferKind::kScratch;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
  BufferRole role = BufferRole::kTensor;
  std::int64_t elements() const;  // product of dims (size of the scratch allocation)
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

/// An element of a buffer: one index expression per dim.
struct Access {
  int buffer = 0;
  std::vector<IndexExpr> index;
  friend bool operator==(const Access&, const Access&) = default;
};

enum class LoopKind : std::uint8_t {
  kSerial,
  kParallel,    // iterations are independent; the runtime's thread pool runs them
  kUnrolled,    // a backend emits the body once per iteration
  kVectorized,  // the body is evaluated for all iterations at once in vector lanes
};

struct Stmt;

/// for var in [begin, end) step step.
struct Loop {
  VarId var = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t step = 1;
  LoopKind kind = LoopKind::kSerial;
  /// Names a peeled part ("top", "interior", "residue 1", ...) for the printer and logs.
  std::string label;
  std::vector<Stmt> body;
  std::int64_t trip_count() const { return end > begin ? (end - begin + step - 1) / step : 0; }
};

/// A reduction loop inside a Tile: for var in [begin, end) step step.
struct ReduceLoop {
  VarId var = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t step = 1;
  friend bool operator==(const ReduceLoop&, const ReduceLoop&) = default;
};

/// The register-tile accumulate node, the inner block of every op:
///
///   for r in [0, rows), v in [0, cols):
///     acc[r][v] = accumulate ? c[r, v] : 0
///     for each point of `reduce` (nested, outer first) where every guard holds:
///       acc[r][v] += a[r, k, v] * b[k, v]
///     c[r, v] = acc[r][v]                      (rounded once to c's dtype)
///
/// `row_var` and `col_var` are variables bound only inside the node; a, b, c, and the guards
/// may use them and every enclosing loop variable. Accumulation is in f32 for half/bfloat16/
/// float32 and in f64 for float64. `cols` may be smaller than the target's vector length:
/// backends then mask the tail lanes.
///
/// Indices are evaluated per (r, v, reduce point), so any operand may vary along v. The tiles
/// register_tile builds with cols > 1 have one of two forms:
///   - outer product: a independent of col_var (a true broadcast) and b at flat coefficient 1
///     along it (for NCHW the operands are swapped so the activation is b);
///   - elementwise (depthwise channels): a and b both at flat coefficient 1 along col_var,
///     acc[r][v] += a[r, k, v] * b[k, v], one vector multiply-accumulate per (r, v).
/// What the schedule guarantees (and backends may rely on for speed, never for correctness):
/// c at flat coefficient 1 along col_var in the elementwise form and at a positive one in the
/// outer product (a stride residue's W positions are strided: written once per tile); with
/// rows > 1, b is independent of row_var (in the elementwise form the operand that moves with
/// the row is a). Tiles under a loop labelled "interior" with no border-labelled loop ("top",
/// "bottom", "left", "right", "low", "high", or "guarded": a loop border_peel was asked to keep
/// whole) around them have no guards.
///
/// A paired tile (`paired`, set by pair_reduction for bfloat16 where the CPU has
/// `vdpbf16ps`) takes two reduction products per point: acc[r][v] += a*b + a2*b2, a2 and b2
/// being the second element of each pair. The x86 emitter relies on a2 being the element
/// after a, and b and b2 interleaved ([..][cols][2]) so one 32-bit lane holds both.
struct Tile {
  VarId row_var = 0;
  std::int64_t rows = 1;
  VarId col_var = 0;
  std::int64_t cols = 1;
  std::vector<ReduceLoop> reduce;
  std::vector<Guard> guards;
  Access a;
  Access b;
  Access c;
  bool accumulate = false;
  bool paired = false;
  // c is written with non-temporal stores, bypassing the caches: set only on tiles that write
  // whole cache lines of an output the kernel never reads back (stream_output_stores).
  bool stream = false;
  // The backend prefetches the lines of the per-row operand that the next row group will read
  // (prefetch_streamed_rows): set only where that operand outgrows the core's L2.
  bool prefetch_next_rows = false;
  // Per operand (a, b) that takes a new line per reduction point: the distance in its
  // elements to the same point of the next block of points the nest will reduce (the next
  // row chunk, the next image), or, where the tile reduces over every point, to the same
  // point's lines the following tiles read next (its next channels); the backend prefetches,
  // at every point, the lines the tile reads there (a broadcast's line, or the columns'
  // lines). Zero: none. Set by prefetch_next_blocks where the operand streams from beyond the
  // core's L2.
  std::int64_t prefetch_next_block_a = 0;
  std::int64_t prefetch_next_block_b = 0;
  Access a2;  // used only when paired
  Access b2;
};

/// Elementwise: dst = src (converted to dst's dtype), dst += src if accumulate, or dst = 0
/// when there is no src. Used for zero fills, filter packing and reducing partial sums.
struct Store {
  Access dst;
  bool has_src = false;
  Access src;
  bool accumulate = false;
  // dst may be written with non-temporal stores where the backend writes whole cache lines:
  // set only on copies into an output the kernel never reads back (stream_output_stores).
  bool stream = false;
};

struct Stmt {
  std::variant<Loop, Tile, Store> node;
};

/// A whole kernel: its buffers, variable names and top-level statements, run in order.
struct LoopNest {
  ConvProblem problem;
  std::vector<Buffer> buffers;
  std::vector<std::string> var_names;
  std::vector<VarRole> var_roles;  // one per variable, as var_names
  std::vector<Stmt> body;
  /// The kernel's name tokens, set once the schedule is final (the IR printer shows them).
  std::string schedule_summary;
  /// Quantities a pass derived by applying its plan's rules to the shapes it found (a blocked
  /// reduction's chunk rows, ...), by name, for the kernel's name and logs. Passes never read
  /// them to decide anything.
  std::map<std::string, std::int64_t> derived;

  VarId new_var(std::string name, VarRole role = VarRole::kOther);
  VarRole role_of(VarId var) const { return var_roles[static_cast<std::size_t>(var)]; }
  int add_buffer(Buffer b);
  int buffer_of_kind(BufferKind kind) const;  // -1 when absent
  int buffer_of_role(BufferRole role) const;  // the first such buffer, -1 when absent
  /// Bytes of all scratch buffers.
  std::int64_t scratch_bytes() const;
};

/// Element offset of `access` in its buffer: sum(index_d * stride_d). Requires every
/// divisor to be 1 (after the stride-residue pass) and returns false otherwise.
bool flatten_access(const LoopNest& nest, const Access& access, Affine* offset);

/// Accumulator dtype of a LoopNest's tiles: f64 for float64, f32 otherwise.
DType accumulator_dtype(DType dtype);

}  // namespace convjit::ir
