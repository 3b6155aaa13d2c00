// The x86 emitter on hand-built loop nests, one IR construct at a time, each compared with the
// IR interpreter on the same nest (and one with a plain C++ loop): reduction tiles with and
// without unrolled remainders, guards per row and per point (with divisors), masked and
// strided columns, row-group splits, accumulate, paired bfloat16 tiles (vdpbf16ps and AMX),
// stores (vector, scalar, zero, accumulate, converting, into scratch), parallel loops; every
// dtype at both ISAs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/x86/x86_backend.hpp"
#include "ir/interpreter.hpp"
#include "convjit/numeric.hpp"
#include "support/test_tensors.hpp"

namespace convjit::codegen {
namespace {

using ir::Affine;
using ir::BufferKind;

// Builds small nests: row-major buffers, variables, accesses.
class NestBuilder {
 public:
  explicit NestBuilder(DType dtype) { nest_.problem.dtype = dtype; }

  int buffer(BufferKind kind, DType dtype, std::vector<std::int64_t> dims) {
    ir::Buffer b;
    b.name = fmt::format("b{}", nest_.buffers.size());
    b.kind = kind;
    b.dtype = dtype;
    b.strides.assign(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) b.strides[i - 1] = b.strides[i] * dims[i];
    b.dims = std::move(dims);
    return nest_.add_buffer(std::move(b));
  }
  ir::VarId var(const char* name) { return nest_.new_var(name); }
  static ir::Access access(int buffer, std::vector<Affine> index) {
    ir::Access a;
    a.buffer = buffer;
    for (Affine& e : index) a.index.emplace_back(std::move(e));
    return a;
  }
  ir::LoopNest& nest() { return nest_; }

 private:
  ir::LoopNest nest_;
};

Affine v(ir::VarId id, std::int64_t coef = 1) { return Affine::var(id, coef); }
Affine k(std::int64_t c) { return Affine::constant_of(c); }

ir::Stmt loop(ir::VarId var, std::int64_t begin, std::int64_t end, std::vector<ir::Stmt> body,
              ir::LoopKind kind = ir::LoopKind::kSerial, std::int64_t step = 1) {
  ir::Loop l;
  l.var = var;
  l.begin = begin;
  l.end = end;
  l.step = step;
  l.kind = kind;
  l.body = std::move(body);
  return ir::Stmt{std::move(l)};
}

// An AVX-512 target with every feature the emitter uses: on a host without AVX-512 its code
// is generated (and must assemble) but not run.
cpu::CpuInfo synthetic_avx512() {
  cpu::CpuInfo t = cpu::CpuInfo::generic();
  t.isa = cpu::Isa::kAvx512;
  t.vector_bytes = 64;
  t.vector_registers = 32;
  t.has_fma = true;
  t.has_f16c = true;
  t.has_avx512_bf16 = true;
  return t;
}

bool runs_here(const cpu::CpuInfo& t) {
  const cpu::CpuInfo host = cpu::CpuInfo::host(t.isa);
  return host.isa == t.isa && (host.has_amx_bf16 || !t.has_amx_bf16);
}

std::vector<cpu::CpuInfo> targets() {
  std::vector<cpu::CpuInfo> out;
  const cpu::CpuInfo avx512 = cpu::CpuInfo::host(cpu::Isa::kAvx512);
  out.push_back(avx512.isa == cpu::Isa::kAvx512 ? avx512 : synthetic_avx512());
  cpu::CpuInfo no_bf16 = out.back();  // the integer rounding path for bfloat16 results
  if (no_bf16.has_avx512_bf16) {
    no_bf16.has_avx512_bf16 = false;
    out.push_back(no_bf16);
    // A host whose vdpbf16ps is slower than its FMAs widens bfloat16, and one with AMX runs
    // the paired tiles there: the vdpbf16ps tiles too.
    if (!out.front().bf16_dot_beats_fma || out.front().has_amx_bf16) {
      cpu::CpuInfo dot = out.front();
      dot.bf16_dot_beats_fma = true;
      dot.has_amx_bf16 = false;
      out.push_back(dot);
    }
  }
  const cpu::CpuInfo avx2 = cpu::CpuInfo::host(cpu::Isa::kAvx2);
  if (avx2.isa == cpu::Isa::kAvx2) out.push_back(avx2);
  return out;
}

ParallelFor thread_for() {
  return [](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    const std::int64_t chunks = std::min<std::int64_t>(n, 3);
    std::vector<std::thread> threads;
    for (std::int64_t c = 0; c < chunks; ++c) {
      threads.emplace_back([&, c] { body(n * c / chunks, n * (c + 1) / chunks); });
    }
    for (std::thread& t : threads) t.join();
  };
}

// The X, W and Y buffers of a nest, filled with seeded random values.
struct Operands {
  std::vector<convjit::testing::TestTensor> tensors;  // indexed by BufferKind kX, kW, kY
  OperandPointers pointers() {
    return {tensors[0].data(), tensors[1].data(), tensors[2].data()};
  }
};

Operands make_operands(const ir::LoopNest& nest) {
  Operands o;
  o.tensors.resize(3);
  for (const ir::Buffer& b : nest.buffers) {
    if (b.kind == BufferKind::kScratch) continue;
    const auto i = static_cast<std::size_t>(b.kind);
    o.tensors[i] = convjit::testing::random_tensor(b.dtype, {b.elements()}, 100 + i);
  }
  return o;
}

// JIT and interpreter on copies of the same operands; every tensor must agree afterwards
// (inputs included: nothing may be written outside the outputs).
::testing::AssertionResult jit_matches_interpreter(const ir::LoopNest& nest,
                                                   const cpu::CpuInfo& target,
                                                   std::int64_t reduction_length,
                                                   bool threaded = false) {
  std::string why;
  if (!x86::can_emit(nest, target, &why)) return ::testing::AssertionFailure() << "refused: " << why;
  auto code = x86::emit_nest(nest, target);
  if (!code) return ::testing::AssertionFailure() << code.status().to_string();
  if (!runs_here(target)) return ::testing::AssertionSuccess();
  Operands jit = make_operands(nest);
  Operands ref = jit;
  const Status st = (*code)->run(jit.pointers(), RunContext{threaded ? thread_for() : ParallelFor(serial_for)});
  if (!st) return ::testing::AssertionFailure() << st.to_string();
  const Status ist = ir::interpret(nest, ref.pointers(), serial_for);
  if (!ist) return ::testing::AssertionFailure() << ist.to_string();
  for (std::size_t i = 0; i < 3; ++i) {
    if (jit.tensors[i].elements() == 0) continue;
    const auto tol = convjit::testing::tolerance(jit.tensors[i].dtype(), reduction_length);
    auto r = convjit::testing::all_close(jit.tensors[i].view(), ref.tensors[i].view(), tol);
    if (!r) return r << " (tensor " << i << ", " << target.name() << ")";
  }
  return ::testing::AssertionSuccess();
}

const DType kAllDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kHalf};

// dW[c, o] = sum_{n,h,w} x[n,h,w,c] * dy[n,h,w,o]: the backprop-filter tile, rows over c,
// columns over o, blocked over o in an outer loop.
ir::LoopNest filter_like_nest(DType dt, std::int64_t c, std::int64_t o, std::int64_t cols,
                              std::int64_t width, bool accumulate) {
  NestBuilder nb(dt);
  const int x = nb.buffer(BufferKind::kX, dt, {2, 3, width, c});
  const int w = nb.buffer(BufferKind::kW, dt, {c, o});
  const int y = nb.buffer(BufferKind::kY, dt, {2, 3, width, o});
  const ir::VarId ob = nb.var("ob"), r = nb.var("r"), col = nb.var("col");
  const ir::VarId n = nb.var("n"), h = nb.var("h"), ww = nb.var("w");
  ir::Tile t;
  t.row_var = r;
  t.rows = c;
  t.col_var = col;
  t.cols = cols;
  t.reduce = {{n, 0, 2, 1}, {h, 0, 3, 1}, {ww, 0, width, 1}};
  t.a = NestBuilder::access(x, {v(n), v(h), v(ww), v(r)});
  t.b = NestBuilder::access(y, {v(n), v(h), v(ww), v(ob, cols) + v(col)});
  t.c = NestBuilder::access(w, {v(r), v(ob, cols) + v(col)});
  t.accumulate = accumulate;
  nb.nest().body.push_back(loop(ob, 0, o / cols, {ir::Stmt{t}}));
  return std::move(nb.nest());
}

TEST(X86Emitter, FilterLikeTileEveryDtypeAndTail) {
  struct Case {
    std::int64_t c, o, cols, width;
  };
  // Full vectors, masked tails, several vectors per row, a row-group split, a long unrolled
  // reduction with a remainder.
  const Case cases[] = {{4, 32, 16, 5}, {3, 21, 21, 6}, {5, 40, 40, 3}, {14, 64, 64, 2},
                        {2, 5, 5, 4},   {4, 16, 16, 37}, {1, 1, 1, 9}};
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : kAllDtypes) {
      for (const Case& cs : cases) {
        for (bool acc : {false, true}) {
          const ir::LoopNest nest = filter_like_nest(dt, cs.c, cs.o, cs.cols, cs.width, acc);
          EXPECT_TRUE(jit_matches_interpreter(nest, target, 6 * cs.width + 1))
              << dtype_name(dt) << " c=" << cs.c << " o=" << cs.o << " cols=" << cs.cols
              << " width=" << cs.width << " acc=" << acc;
        }
      }
    }
  }
}

TEST(X86Emitter, FilterLikeTileMatchesPlainLoop) {
  const std::int64_t c = 3, o = 20, width = 11;
  const ir::LoopNest nest = filter_like_nest(DType::kFloat32, c, o, o, width, false);
  for (const cpu::CpuInfo& target : targets()) {
    auto code = x86::emit_nest(nest, target);
    ASSERT_TRUE(code.has_value()) << code.status().to_string();
    if (!runs_here(target)) continue;
    Operands ops = make_operands(nest);
    ASSERT_TRUE((*code)->run(ops.pointers(), RunContext{}).is_ok());
    const auto* xs = static_cast<const float*>(ops.tensors[0].data());
    const auto* ys = static_cast<const float*>(ops.tensors[2].data());
    const auto* ws = static_cast<const float*>(ops.tensors[1].data());
    for (std::int64_t ci = 0; ci < c; ++ci) {
      for (std::int64_t oi = 0; oi < o; ++oi) {
        double want = 0;
        for (std::int64_t p = 0; p < 2 * 3 * width; ++p) want += double(xs[p * c + ci]) * ys[p * o + oi];
        EXPECT_NEAR(ws[ci * o + oi], want, 1e-4) << ci << "," << oi << " " << target.name();
      }
    }
  }
}

// dx[p, col] = sum_{t,o} dy[p + t, o] * w[t, o, col] with the output channels o in pairs: the
// paired bfloat16 tile the input gradient's pair_reduction makes (dy's pair adjacent, the
// filter's pairs interleaved per column), rows over pixels p, blocked over p in an outer loop.
// A guard on the outer reduce loop skips the taps past the end of dy (it depends on the row
// block, not the row).
ir::LoopNest paired_nest(DType out, std::int64_t rows, std::int64_t blocks, std::int64_t cols,
                         std::int64_t pairs, std::int64_t taps, bool accumulate) {
  NestBuilder nb(DType::kBFloat16);
  const std::int64_t pixels = rows * blocks;
  const int dy = nb.buffer(BufferKind::kX, DType::kBFloat16, {pixels + taps, 2 * pairs});
  const int w = nb.buffer(BufferKind::kW, DType::kBFloat16, {taps, pairs, cols, 2});
  const int dx = nb.buffer(BufferKind::kY, out, {pixels, cols});
  const ir::VarId pb = nb.var("pb"), r = nb.var("r"), col = nb.var("col");
  const ir::VarId t = nb.var("t"), o = nb.var("o");
  ir::Tile tile;
  tile.row_var = r;
  tile.rows = rows;
  tile.col_var = col;
  tile.cols = cols;
  tile.reduce = {{t, 0, taps, 1}, {o, 0, pairs, 1}};
  tile.paired = true;
  const Affine pixel = v(pb, rows) + v(r);
  tile.a = NestBuilder::access(dy, {pixel + v(t), v(o, 2)});
  tile.a2 = NestBuilder::access(dy, {pixel + v(t), v(o, 2) + k(1)});
  tile.b = NestBuilder::access(w, {v(t), v(o), v(col), k(0)});
  tile.b2 = NestBuilder::access(w, {v(t), v(o), v(col), k(1)});
  tile.c = NestBuilder::access(dx, {pixel, v(col)});
  tile.accumulate = accumulate;
  // Block pb reads taps t < taps - pb % 2 only: a guard on t and pb, constant over the rows.
  tile.guards.push_back({ir::IndexExpr(v(t) + v(pb)), 0, taps + blocks / 2});
  nb.nest().body.push_back(loop(pb, 0, blocks, {ir::Stmt{tile}}));
  return std::move(nb.nest());
}

// The paired tile through every target that runs it: vdpbf16ps, and AMX's tdpbf16ps blocks
// (where the host has AMX, and assembled but not run where it does not): row blocks of 16 and
// a partial one, one to five column blocks of 16 and partial ones (groups of 2x2, 1x3 and
// 3x1 tiles), pairs per step of 16 and of divisors (20 pairs: 10; 7: 7) or steps of 16 and a
// tail pass (31 pairs: 16 + 15; 37: 2 x 16 + 5), accumulating and not, into bfloat16 and f32.
TEST(X86Emitter, PairedTilesOnVdpbf16psAndAmx) {
  struct Case {
    std::int64_t rows, blocks, cols, pairs, taps;
  };
  const Case cases[] = {{16, 2, 32, 16, 2}, {37, 2, 40, 20, 2}, {5, 3, 48, 7, 3},
                        {50, 1, 24, 8, 2},  {20, 2, 70, 16, 1}, {1, 4, 16, 32, 2},
                        {20, 2, 40, 31, 3}, {33, 1, 16, 37, 4}};
  std::vector<cpu::CpuInfo> paired_targets;
  for (const cpu::CpuInfo& t : targets()) {
    if (t.isa == cpu::Isa::kAvx512 && t.has_avx512_bf16) paired_targets.push_back(t);
  }
  cpu::CpuInfo amx = synthetic_avx512();
  amx.has_amx_bf16 = true;
  bool have_amx = false;
  for (const cpu::CpuInfo& t : paired_targets) have_amx = have_amx || t.has_amx_bf16;
  if (!have_amx) paired_targets.push_back(amx);
  for (const cpu::CpuInfo& target : paired_targets) {
    for (DType out : {DType::kBFloat16, DType::kFloat32}) {
      for (const Case& cs : cases) {
        for (bool acc : {false, true}) {
          const ir::LoopNest nest =
              paired_nest(out, cs.rows, cs.blocks, cs.cols, cs.pairs, cs.taps, acc);
          EXPECT_TRUE(jit_matches_interpreter(nest, target, 2 * cs.pairs * cs.taps + 1))
              << target.name() << " " << dtype_name(out) << " rows=" << cs.rows
              << " cols=" << cs.cols << " pairs=" << cs.pairs << " acc=" << acc;
        }
      }
    }
  }
}

// y[p, col] = sum_k x[p + k - 1] * w[k, col] over 0 <= p + k - 1 < len: a guard that depends
// on the row (p = pb * rows + r); `divisor` adds a parity guard on p + k.
ir::LoopNest guarded_nest(DType dt, std::int64_t rows, std::int64_t cols, std::int64_t divisor) {
  const std::int64_t len = 12, taps = 3;
  NestBuilder nb(dt);
  const int x = nb.buffer(BufferKind::kX, dt, {len});
  const int w = nb.buffer(BufferKind::kW, dt, {taps, cols});
  const int y = nb.buffer(BufferKind::kY, dt, {len, cols});
  const ir::VarId pb = nb.var("pb"), r = nb.var("r"), col = nb.var("col"), kk = nb.var("k");
  ir::Tile t;
  t.row_var = r;
  t.rows = rows;
  t.col_var = col;
  t.cols = cols;
  t.reduce = {{kk, 0, taps, 1}};
  const Affine pos = v(pb, rows) + v(r) + v(kk) + k(-1);
  t.guards.push_back({ir::IndexExpr(pos), 0, len});
  if (divisor > 1) t.guards.push_back({ir::IndexExpr(pos + k(1), divisor), 0, len});
  t.a = NestBuilder::access(x, {pos});
  t.b = NestBuilder::access(w, {v(kk), v(col)});
  t.c = NestBuilder::access(y, {v(pb, rows) + v(r), v(col)});
  nb.nest().body.push_back(loop(pb, 0, len / rows, {ir::Stmt{t}}));
  return std::move(nb.nest());
}

TEST(X86Emitter, GuardsPerRowPerPointAndWithDivisors) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : kAllDtypes) {
      for (std::int64_t rows : {1, 3, 4}) {
        for (std::int64_t cols : {7, 16, 19}) {
          for (std::int64_t divisor : {1, 2}) {
            EXPECT_TRUE(jit_matches_interpreter(guarded_nest(dt, rows, cols, divisor), target, 3))
                << dtype_name(dt) << " rows=" << rows << " cols=" << cols << " div=" << divisor;
          }
        }
      }
    }
  }
}

// y[r, col] = sum_k w[r, k] * x[col + k*dil - pad] over 0 <= col + k*dil - pad < len: a guard
// that depends on the column, as the schedule leaves on small or dilated NCHW borders. Lanes
// whose guard fails contribute nothing and must not be read (x has exactly `len` elements).
ir::LoopNest column_guarded_nest(DType dt, std::int64_t rows, std::int64_t cols,
                                 std::int64_t dil, std::int64_t pad) {
  const std::int64_t len = cols, taps = 3;
  NestBuilder nb(dt);
  const int x = nb.buffer(BufferKind::kX, dt, {len});
  const int w = nb.buffer(BufferKind::kW, dt, {rows, taps});
  const int y = nb.buffer(BufferKind::kY, dt, {rows, cols});
  const ir::VarId r = nb.var("r"), col = nb.var("col"), kk = nb.var("k");
  ir::Tile t;
  t.row_var = r;
  t.rows = rows;
  t.col_var = col;
  t.cols = cols;
  t.reduce = {{kk, 0, taps, 1}};
  const Affine pos = v(col) + v(kk, dil) + k(-pad);
  t.guards.push_back({ir::IndexExpr(pos), 0, len});
  t.a = NestBuilder::access(w, {v(r), v(kk)});
  t.b = NestBuilder::access(x, {pos});
  t.c = NestBuilder::access(y, {v(r), v(col)});
  nb.nest().body.push_back(ir::Stmt{t});
  return std::move(nb.nest());
}

TEST(X86Emitter, GuardsAlongTheColumn) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : kAllDtypes) {
      for (std::int64_t cols : {1, 6, 19}) {
        for (auto [dil, pad] : {std::pair{1, 1}, {3, 3}, {2, 0}}) {
          EXPECT_TRUE(jit_matches_interpreter(column_guarded_nest(dt, 2, cols, dil, pad), target, 3))
              << dtype_name(dt) << " cols=" << cols << " dil=" << dil << " pad=" << pad;
        }
      }
    }
  }
}

// Depthwise-like: both operands vary along the columns; a per row, b shared; optionally b
// strided along the columns and c strided (gathers and scatters through the bounce buffer).
ir::LoopNest vector_operands_nest(DType dt, std::int64_t rows, std::int64_t cols, std::int64_t b_stride,
                                  std::int64_t c_stride) {
  const std::int64_t taps = 3;
  NestBuilder nb(dt);
  const int x = nb.buffer(BufferKind::kX, dt, {rows + taps, cols});
  const int w = nb.buffer(BufferKind::kW, dt, {taps, cols * b_stride});
  const int y = nb.buffer(BufferKind::kY, dt, {rows, cols * c_stride});
  const ir::VarId r = nb.var("r"), col = nb.var("col"), kk = nb.var("k");
  ir::Tile t;
  t.row_var = r;
  t.rows = rows;
  t.col_var = col;
  t.cols = cols;
  t.reduce = {{kk, 0, taps, 1}};
  t.a = NestBuilder::access(x, {v(r) + v(kk), v(col)});
  t.b = NestBuilder::access(w, {v(kk), v(col, b_stride)});
  t.c = NestBuilder::access(y, {v(r), v(col, c_stride)});
  nb.nest().body.push_back(ir::Stmt{t});
  return std::move(nb.nest());
}

TEST(X86Emitter, VectorOperandsAndStridedColumns) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : kAllDtypes) {
      for (std::int64_t cols : {5, 16, 35}) {
        for (auto [bs, cs] : {std::pair{1, 1}, {2, 1}, {1, 3}, {3, 2}}) {
          EXPECT_TRUE(jit_matches_interpreter(vector_operands_nest(dt, 4, cols, bs, cs), target, 3))
              << dtype_name(dt) << " cols=" << cols << " b_stride=" << bs << " c_stride=" << cs;
        }
      }
    }
  }
}

// Stores: a converting contiguous copy (vector with tail), a transposing pack (scalar), a zero
// fill, an accumulate, and a round trip through scratch, in a parallel outer loop.
ir::LoopNest store_nest(DType dt, DType scratch_dt, std::int64_t rows, std::int64_t len,
                        ir::LoopKind outer) {
  NestBuilder nb(dt);
  const int x = nb.buffer(BufferKind::kX, dt, {rows, len});
  const int w = nb.buffer(BufferKind::kW, dt, {len, rows});
  const int y = nb.buffer(BufferKind::kY, dt, {rows, len});
  const int s = nb.buffer(BufferKind::kScratch, scratch_dt, {rows, len});
  const ir::VarId i = nb.var("i"), j = nb.var("j"), i2 = nb.var("i2"), j2 = nb.var("j2");
  auto store = [](ir::Access dst, const ir::Access* src, bool accumulate) {
    ir::Store st;
    st.dst = std::move(dst);
    st.has_src = src != nullptr;
    if (src) st.src = *src;
    st.accumulate = accumulate;
    return ir::Stmt{st};
  };
  const ir::Access x_ij = NestBuilder::access(x, {v(i), v(j)});
  const ir::Access s_ij = NestBuilder::access(s, {v(i), v(j)});
  const ir::Access y_ij = NestBuilder::access(y, {v(i), v(j)});
  const ir::Access w_ji = NestBuilder::access(w, {v(j2), v(i2)});
  // scratch = x; y = 0; y += scratch (vector paths); w^T packed into scratch rows (scalar).
  nb.nest().body.push_back(loop(i, 0, rows, {
      loop(j, 0, len, {store(s_ij, &x_ij, false)}),
      loop(j, 0, len, {store(y_ij, nullptr, false)}),
      loop(j, 0, len, {store(y_ij, &s_ij, true)}),
      loop(j, 0, len, {store(y_ij, &s_ij, true)}),
  }, outer));
  nb.nest().body.push_back(loop(i2, 0, rows, {loop(j2, 0, len, {
      store(NestBuilder::access(s, {v(i2), v(j2)}), &w_ji, false),
      store(NestBuilder::access(x, {v(i2), v(j2)}), &w_ji, true)})}));
  return std::move(nb.nest());
}

TEST(X86Emitter, StoresVectorScalarZeroAccumulateScratch) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : kAllDtypes) {
      const DType sdt = ir::accumulator_dtype(dt);
      for (std::int64_t len : {3, 16, 37}) {
        for (auto kind : {ir::LoopKind::kSerial, ir::LoopKind::kParallel}) {
          EXPECT_TRUE(jit_matches_interpreter(store_nest(dt, sdt, 5, len, kind), target, 2,
                                              kind == ir::LoopKind::kParallel))
              << dtype_name(dt) << " len=" << len;
        }
      }
      // Same-dtype scratch (16-bit to 16-bit packing).
      EXPECT_TRUE(jit_matches_interpreter(store_nest(dt, dt, 3, 20, ir::LoopKind::kSerial), target, 2));
    }
  }
}

// A transposing copy of 16-bit elements into f32 scratch (a 16-bit dy made channels-last, or
// transposed for W-vector tiles): 8x8 register blocks widened as they load, the row and column
// tails element by element; the scratch is then copied to Y to compare.
TEST(X86Emitter, TransposesSixteenBitSourcesWideningToF32) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : {DType::kBFloat16, DType::kHalf}) {
      for (auto [rows, cols] :
           {std::pair<std::int64_t, std::int64_t>{8, 8}, {13, 19}, {21, 8}, {16, 35}, {5, 11}}) {
        NestBuilder nb(dt);
        const int x = nb.buffer(BufferKind::kX, dt, {cols, rows});
        const int y = nb.buffer(BufferKind::kY, dt, {rows, cols});
        const int s = nb.buffer(BufferKind::kScratch, DType::kFloat32, {rows, cols});
        const ir::VarId i = nb.var("i"), j = nb.var("j"), i2 = nb.var("i2"), j2 = nb.var("j2");
        ir::Store transpose;
        transpose.dst = NestBuilder::access(s, {v(i), v(j)});
        transpose.has_src = true;
        transpose.src = NestBuilder::access(x, {v(j), v(i)});
        ir::Store out;
        out.dst = NestBuilder::access(y, {v(i2), v(j2)});
        out.has_src = true;
        out.src = NestBuilder::access(s, {v(i2), v(j2)});
        nb.nest().body.push_back(loop(i, 0, rows, {loop(j, 0, cols, {ir::Stmt{transpose}})}));
        nb.nest().body.push_back(loop(i2, 0, rows, {loop(j2, 0, cols, {ir::Stmt{out}})}));
        EXPECT_TRUE(jit_matches_interpreter(nb.nest(), target, 1))
            << dtype_name(dt) << " rows=" << rows << " cols=" << cols;
      }
    }
  }
}

// Two 16-bit rows interleaved into the halves of each dword (copy_batch_operands' copy of an image
// pair): whole vectors of pairs and a tail of single pairs, then copied to Y to compare.
TEST(X86Emitter, InterleavesTwoSixteenBitRowsIntoPairs) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : {DType::kBFloat16, DType::kHalf}) {
      for (std::int64_t len : {3, 8, 16, 37, 40}) {
        NestBuilder nb(dt);
        const int x = nb.buffer(BufferKind::kX, dt, {2, len});
        const int y = nb.buffer(BufferKind::kY, dt, {len, 2});
        const int q = nb.buffer(BufferKind::kScratch, dt, {len, 2});
        const ir::VarId i = nb.var("i"), j = nb.var("j"), m = nb.var("m");
        std::vector<ir::Stmt> members;
        for (std::int64_t member = 0; member < 2; ++member) {
          ir::Store st;
          st.dst = NestBuilder::access(q, {v(i), k(member)});
          st.has_src = true;
          st.src = NestBuilder::access(x, {k(member), v(i)});
          members.push_back(ir::Stmt{st});
        }
        ir::Store out;
        out.dst = NestBuilder::access(y, {v(j), v(m)});
        out.has_src = true;
        out.src = NestBuilder::access(q, {v(j), v(m)});
        nb.nest().body.push_back(loop(i, 0, len, std::move(members)));
        nb.nest().body.push_back(loop(j, 0, len, {loop(m, 0, 2, {ir::Stmt{out}})}));
        EXPECT_TRUE(jit_matches_interpreter(nb.nest(), target, 1))
            << dtype_name(dt) << " len=" << len;
      }
    }
  }
}

// A parallel loop over the batch around a reduction tile, plus a nested parallel loop run
// serially inside it.
TEST(X86Emitter, ParallelLoopsSplitAcrossThreads) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      NestBuilder nb(dt);
      const std::int64_t batch = 7, c = 4, o = 24, len = 10;
      const int x = nb.buffer(BufferKind::kX, dt, {batch, len, c});
      const int w = nb.buffer(BufferKind::kW, dt, {len, o});
      const int y = nb.buffer(BufferKind::kY, dt, {batch, 2, c, o});
      const ir::VarId n = nb.var("n"), half = nb.var("half"), r = nb.var("r"), col = nb.var("col"),
                      kk = nb.var("k");
      ir::Tile t;
      t.row_var = r;
      t.rows = c;
      t.col_var = col;
      t.cols = o;
      t.reduce = {{kk, 0, len / 2, 1}};
      t.a = NestBuilder::access(x, {v(n), v(half, len / 2) + v(kk), v(r)});
      t.b = NestBuilder::access(w, {v(half, len / 2) + v(kk), v(col)});
      t.c = NestBuilder::access(y, {v(n), v(half), v(r), v(col)});
      nb.nest().body.push_back(loop(n, 0, batch, {loop(half, 0, 2, {ir::Stmt{t}}, ir::LoopKind::kParallel)},
                                    ir::LoopKind::kParallel));
      for (bool threaded : {false, true}) {
        EXPECT_TRUE(jit_matches_interpreter(nb.nest(), target, len, threaded)) << dtype_name(dt);
      }
    }
  }
}

// Reduce loops with steps > 1, non-zero begins, more levels than counter registers and a
// reduction with no points (the tile then stores its initial value).
TEST(X86Emitter, DeepAndSteppedReductions) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kHalf}) {
      NestBuilder nb(dt);
      const int x = nb.buffer(BufferKind::kX, dt, {2, 2, 2, 2, 2, 2, 2, 2, 20});
      const int w = nb.buffer(BufferKind::kW, dt, {20, 18});
      const int y = nb.buffer(BufferKind::kY, dt, {3, 18});
      std::vector<ir::VarId> red;
      for (int i = 0; i < 9; ++i) red.push_back(nb.var("k"));
      const ir::VarId r = nb.var("r"), col = nb.var("col");
      ir::Tile t;
      t.row_var = r;
      t.rows = 3;
      t.col_var = col;
      t.cols = 18;
      std::vector<Affine> a_idx;
      for (int i = 0; i < 8; ++i) {
        t.reduce.push_back({red[static_cast<std::size_t>(i)], 0, 2, 1});
        a_idx.push_back(v(red[static_cast<std::size_t>(i)]));
      }
      t.reduce.push_back({red[8], 1, 18, 3});
      a_idx.push_back(v(red[8]) + v(r));
      t.a = NestBuilder::access(x, a_idx);
      t.b = NestBuilder::access(w, {v(red[8]), v(col)});
      t.c = NestBuilder::access(y, {v(r), v(col)});
      nb.nest().body.push_back(ir::Stmt{t});
      EXPECT_TRUE(jit_matches_interpreter(nb.nest(), target, 256 * 6)) << dtype_name(dt);

      ir::Tile empty = t;
      empty.reduce = {{red[0], 4, 4, 1}};
      empty.a = NestBuilder::access(x, {k(0), k(0), k(0), k(0), k(0), k(0), k(0), k(0), v(red[0])});
      empty.b = NestBuilder::access(w, {v(red[0]), v(col)});
      empty.accumulate = true;
      nb.nest().body = {ir::Stmt{empty}};
      EXPECT_TRUE(jit_matches_interpreter(nb.nest(), target, 1)) << dtype_name(dt);
    }
  }
}

// bfloat16 and half results round to nearest even, and NaN stays NaN.
TEST(X86Emitter, NarrowingRoundsToNearestEvenAndKeepsNaN) {
  for (const cpu::CpuInfo& target : targets()) {
    for (DType dt : {DType::kBFloat16, DType::kHalf}) {
      NestBuilder nb(dt);
      const std::int64_t count = 37;
      const int x = nb.buffer(BufferKind::kX, DType::kFloat32, {count});
      const int y = nb.buffer(BufferKind::kY, dt, {count});
      nb.buffer(BufferKind::kW, DType::kFloat32, {1});
      const ir::VarId i = nb.var("i");
      ir::Store st;
      st.dst = NestBuilder::access(y, {v(i)});
      st.has_src = true;
      st.src = NestBuilder::access(x, {v(i)});
      nb.nest().body.push_back(loop(i, 0, count, {ir::Stmt{st}}));
      auto code = x86::emit_nest(nb.nest(), target);
      ASSERT_TRUE(code.has_value()) << code.status().to_string();
      if (!runs_here(target)) continue;
      std::vector<float> in(count);
      for (std::int64_t j = 0; j < count; ++j) {
        // Values halfway between representable neighbours, and around them.
        in[static_cast<std::size_t>(j)] = 1.0f + static_cast<float>(j) * 0x1p-10f + (j % 3 - 1) * 0x1p-20f;
      }
      in[5] = std::numeric_limits<float>::quiet_NaN();
      in[6] = -std::numeric_limits<float>::infinity();
      in[7] = 0x1.01p0f;  // exactly halfway for bfloat16: ties to even
      in[8] = 0x1.03p0f;
      std::vector<std::uint16_t> out(count, 0);
      float dummy = 0;
      ASSERT_TRUE((*code)->run({in.data(), &dummy, out.data()}, RunContext{}).is_ok());
      for (std::int64_t j = 0; j < count; ++j) {
        const float f = in[static_cast<std::size_t>(j)];
        const std::uint16_t want = dt == DType::kBFloat16 ? float_to_bfloat16(f) : float_to_half(f);
        const std::uint16_t got = out[static_cast<std::size_t>(j)];
        if (f != f) {
          const float back = dt == DType::kBFloat16 ? bfloat16_to_float(got) : half_to_float(got);
          EXPECT_TRUE(back != back) << "NaN lost at " << j;
        } else {
          EXPECT_EQ(got, want) << dtype_name(dt) << " at " << j << " " << target.name();
        }
      }
    }
  }
}

}  // namespace
}  // namespace convjit::codegen
