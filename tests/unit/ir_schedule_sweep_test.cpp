// Semantic preservation of lowering and every schedule pass: the nest after lowering and after
// each pass is interpreted on random data and compared with the naive reference, over a sweep
// of directions, dtypes, layouts, padding modes, strides, dilations, groups, depth multipliers
// and empty tensors, for the scalar target (serial and threaded) and the host's vector target.
// Structural promises are checked on the way: no divisor survives the residue split and no
// interior tile keeps a guard.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpreter.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "support/cpu_test_targets.hpp"
#include "ir/printer.hpp"
#include "reference/naive.hpp"
#include "support/test_tensors.hpp"

namespace convjit::cpu {
namespace {

using namespace ir;
using testing::generic_target;
using testing::host_target;
using testing::lower_and_schedule;
using testing::run;
using testing::TestTarget;

using convjit::testing::TestTensor;

struct Geometry {
  std::int64_t n, h, w, c, kh, kw;
  std::int64_t filter_in;  // ignored for depthwise (1)
  std::int64_t out;        // oc, or the depth multiplier for depthwise
  std::int64_t sh, sw, dh, dw;
  Padding padding;
  std::int64_t pt = 0, pb = 0, pl = 0, pr = 0;
  bool depthwise = false;
};

void out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, Padding pad,
              std::int64_t* before, std::int64_t* after, std::int64_t* out) {
  const std::int64_t k_eff = (k - 1) * d + 1;
  if (pad == Padding::kValid) {
    *before = *after = 0;
  }
  if (pad == Padding::kSame) {
    *out = (in + s - 1) / s;
    const std::int64_t total = std::max<std::int64_t>(0, (*out - 1) * s + k_eff - in);
    *before = total / 2;
    *after = total - *before;
    return;
  }
  *out = (in + *before + *after - k_eff + s) / s;
}

ConvProblem make_problem(const Geometry& g, ConvDirection dir, DType dtype, DataFormat format) {
  ConvProblem p;
  p.direction = dir;
  p.dtype = dtype;
  p.format = format;
  p.n = g.n;
  p.ih = g.h;
  p.iw = g.w;
  p.ic = g.c;
  p.kh = g.kh;
  p.kw = g.kw;
  p.depthwise = g.depthwise;
  p.filter_in = g.depthwise ? 1 : g.filter_in;
  p.groups = p.filter_in > 0 ? g.c / p.filter_in : 0;
  p.oc = g.depthwise ? g.c * g.out : g.out;
  p.stride_h = g.sh;
  p.stride_w = g.sw;
  p.dilation_h = g.dh;
  p.dilation_w = g.dw;
  p.pad_top = g.pt;
  p.pad_bottom = g.pb;
  p.pad_left = g.pl;
  p.pad_right = g.pr;
  out_size(g.h, g.kh, g.sh, g.dh, g.padding, &p.pad_top, &p.pad_bottom, &p.oh);
  out_size(g.w, g.kw, g.sw, g.dw, g.padding, &p.pad_left, &p.pad_right, &p.ow);
  p.op = dir == ConvDirection::kForward ? (g.depthwise ? OpKind::kDepthwiseConv2dNative : OpKind::kConv2D)
         : dir == ConvDirection::kBackpropData
             ? (g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropInput : OpKind::kConv2DBackpropInput)
             : (g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropFilter : OpKind::kConv2DBackpropFilter);
  return p;
}

std::vector<std::int64_t> shape_of(const ConvProblem& p, TensorRole role) {
  const auto s = p.shape(role);
  return {s.begin(), s.end()};
}

// Splits [0, n) into up to 3 chunks on their own threads, so parallel loops really overlap.
void threaded_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  const std::int64_t chunks = std::min<std::int64_t>(n, 3);
  std::vector<std::thread> threads;
  for (std::int64_t c = 0; c < chunks; ++c) {
    threads.emplace_back([&, c] { body(n * c / chunks, n * (c + 1) / chunks); });
  }
  for (auto& t : threads) t.join();
}

bool has_divisor(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      if (has_divisor(l->body)) return true;
    } else if (const auto* t = std::get_if<Tile>(&s.node)) {
      for (const Access* a : {&t->a, &t->b, &t->c}) {
        for (const IndexExpr& e : a->index) {
          if (e.divisor != 1) return true;
        }
      }
      for (const Guard& g : t->guards) {
        if (g.expr.divisor != 1) return true;
      }
    }
  }
  return false;
}

bool is_border_label(const std::string& label) {
  for (const char* side : {"top", "bottom", "left", "right", "low", "high", "guarded"}) {
    if (label.find(side) != std::string::npos) return true;
  }
  return false;
}

// Tiles with no border loop around them must have no guards. Returns the number checked.
int check_interior(const std::vector<Stmt>& body, bool in_border, std::string* failure) {
  int checked = 0;
  for (const Stmt& s : body) {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      checked += check_interior(l->body, in_border || is_border_label(l->label), failure);
    } else if (const auto* t = std::get_if<Tile>(&s.node)) {
      if (in_border) continue;
      ++checked;
      if (!t->guards.empty()) *failure = "interior tile with guards";
    }
  }
  return checked;
}

struct Operands {
  TestTensor x, w, y;
  OperandPointers ptrs() { return {x.data(), w.data(), y.data()}; }
};

Operands make_operands(const ConvProblem& p, std::uint64_t seed) {
  Operands o;
  o.x = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kX), seed);
  o.w = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kW), seed + 1);
  o.y = convjit::testing::random_tensor(p.dtype, shape_of(p, TensorRole::kY), seed + 2);
  return o;
}

TestTensor& output_of(Operands& o, const ConvProblem& p) {
  const TensorRole r = p.output_role();
  return r == TensorRole::kX ? o.x : r == TensorRole::kW ? o.w : o.y;
}

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> kCases = {
      {1, 5, 5, 3, 3, 3, 3, 4, 1, 1, 1, 1, Padding::kSame},
      {2, 7, 6, 4, 3, 2, 4, 5, 2, 3, 1, 1, Padding::kSame},
      {1, 9, 8, 6, 3, 3, 2, 6, 2, 2, 2, 2, Padding::kValid},  // groups = 3
      {1, 6, 7, 3, 2, 3, 3, 2, 3, 2, 1, 3, Padding::kExplicit, 1, 2, 0, 3},
      {1, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, Padding::kSame, 0, 0, 0, 0, true},
      {2, 7, 5, 3, 3, 2, 1, 2, 2, 2, 2, 1, Padding::kSame, 0, 0, 0, 0, true},
      {1, 5, 4, 2, 1, 1, 2, 3, 2, 2, 1, 1, Padding::kValid},  // 1x1, residues with no tap
      {1, 8, 8, 2, 3, 3, 2, 2, 1, 1, 3, 3, Padding::kExplicit, 6, 5, 6, 5},  // wide borders
      {1, 1, 5, 2, 5, 2, 2, 2, 3, 1, 1, 1, Padding::kValid},                 // out height 0: empty
      {0, 4, 4, 2, 3, 3, 2, 2, 1, 1, 1, 1, Padding::kSame},                  // empty batch
      {1, 12, 11, 17, 3, 3, 17, 19, 1, 1, 1, 1, Padding::kSame},  // channel tails, threads
      {1, 4, 5, 40, 3, 3, 40, 6, 1, 1, 1, 1, Padding::kSame},     // channel blocks (vector targets)
      {5, 6, 5, 3, 3, 2, 3, 18, 1, 2, 1, 1,
       Padding::kSame},  // odd batch: image pairs, a last image
  };
  return kCases;
}

struct SweepParam {
  ConvDirection dir;
  DType dtype;
};

class IrScheduleSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(IrScheduleSweep, EveryStageMatchesTheReference) {
  const auto [dir, dtype] = GetParam();
  const TestTarget host = host_target(Isa::kAvx512, 4);
  // An AVX-512 target with avx512_bf16 whatever the host: its schedules (bfloat16 reduction
  // pairs and image pairs) are interpreted here, so they are checked on any machine.
  TestTarget bf16_dot = generic_target(2);
  bf16_dot.isa = Isa::kAvx512;
  bf16_dot.vector_bytes = 64;
  bf16_dot.vector_registers = 32;
  bf16_dot.has_fma = bf16_dot.has_f16c = bf16_dot.has_avx512_bf16 = true;
  const std::vector<std::pair<TestTarget, bool>> targets = {
      {generic_target(1), false}, {generic_target(4), true}, {host, true}, {bf16_dot, true}};
  std::uint64_t seed = 11;
  for (const DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    for (std::size_t gi = 0; gi < geometries().size(); ++gi) {
      const ConvProblem p = make_problem(geometries()[gi], dir, dtype, format);
      SCOPED_TRACE(fmt::format("geometry {} {} {} {}", gi, direction_name(p.direction),
                               dtype_name(p.dtype), data_format_name(p.format)));
      Operands ref = make_operands(p, seed);
      run_reference(p, ref.ptrs());
      const TestTensor& want = output_of(ref, p);
      const auto tol = convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p));
      for (const auto& target_and_threading : targets) {
        // Plain names, not a structured binding: the observer lambda captures them.
        const TestTarget& target = target_and_threading.first;
        const bool threaded = target_and_threading.second;
        SCOPED_TRACE(target.name() + (threaded ? " threaded" : ""));
        // A 16-bit filter gradient whose filter columns share dy (taps_share_out_backprop)
        // writes dW in parts (border columns, interior) until block_reduction moves them into
        // f32 partial sums, rounded once; interpreted in between, a 16-bit dW would round each
        // part. Those stages run with dW in f32: their parts must add up to the reference's sums
        // as the final kernel's do.
        bool dw_in_parts = false;
        lower_and_schedule(p, target, [&](std::string_view pass, const LoopNest& nest) {
          SCOPED_TRACE(std::string(pass));
          if (pass == "taps_share_out_backprop") {
            dw_in_parts = ir::accumulator_dtype(p.dtype) != p.dtype;
          } else if (pass == "block_reduction") {
            dw_in_parts = false;
          }
          Operands got = make_operands(p, seed);
          const LoopNest* run = &nest;
          LoopNest f32_dw;
          if (dw_in_parts) {
            f32_dw = nest;
            f32_dw.buffers[static_cast<std::size_t>(f32_dw.buffer_of_kind(BufferKind::kW))].dtype =
                DType::kFloat32;
            got.w = TestTensor(DType::kFloat32, got.w.shape());
            run = &f32_dw;
          }
          output_of(got, p).fill(std::numeric_limits<double>::quiet_NaN());
          ASSERT_TRUE(interpret(*run, got.ptrs(),
                                threaded ? ParallelFor(threaded_for) : ParallelFor(serial_for))
                          .is_ok());
          ASSERT_TRUE(convjit::testing::all_close(output_of(got, p).view(), want.view(), tol))
              << print(nest);
          if (pass == "stride_residue_split") EXPECT_FALSE(has_divisor(nest.body)) << print(nest);
          if (pass == "border_peel" || pass == "register_tile" || pass == "parallelize") {
            std::string failure;
            check_interior(nest.body, false, &failure);
            EXPECT_EQ(failure, "") << print(nest);
          }
        });
      }
      ++seed;
    }
  }
}

// Interprets an input-gradient nest threaded, dx first filled with NaN (so an element it
// never writes shows), and compares dx with the reference on operands made from `seed`.
void expect_input_gradient_matches(const ConvProblem& p, const LoopNest& nest, std::uint64_t seed) {
  Operands ref = make_operands(p, seed);
  run_reference(p, ref.ptrs());
  Operands got = make_operands(p, seed);
  got.x.fill(std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(interpret(nest, got.ptrs(), ParallelFor(threaded_for)).is_ok());
  EXPECT_TRUE(convjit::testing::all_close(
      got.x.view(), ref.x.view(),
      convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p))))
      << print(nest);
}

// Bfloat16 input gradients on an AMX core (whatever the host) whose plan sinks the channel
// blocks inside the pixel tiles: 1x1 (pixels as one row) and 3x3 at stride 2 (residues), 72
// input channels (two blocks of 32 and a tail of 8). The nest after that pass and the final
// one, threaded, match the reference.
TEST(IrChannelBlocks, InsideThePixelTilesOnAmxMatchTheReference) {
  const TestTarget amx = testing::avx512_bf16_target(true, 2);
  const std::vector<Geometry> cases = {
      {2, 6, 6, 72, 1, 1, 72, 64, 1, 1, 1, 1, Padding::kValid},
      {2, 5, 66, 72, 3, 3, 72, 32, 2, 2, 1, 1, Padding::kSame},
  };
  std::uint64_t seed = 41;
  for (const Geometry& g : cases) {
    const ConvProblem p =
        make_problem(g, ConvDirection::kBackpropData, DType::kBFloat16, DataFormat::kNHWC);
    SCOPED_TRACE(fmt::format("{}x{} filter", g.kh, g.kw));
    Operands ref = make_operands(p, seed);
    run_reference(p, ref.ptrs());
    const auto tol = convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p));
    bool sunk = false;
    lower_and_schedule(p, amx, [&](std::string_view pass, const LoopNest& nest) {
      if (pass != "channel_blocks_inside_pixels" && pass != "parallelize") return;
      SCOPED_TRACE(std::string(pass));
      sunk = sunk || pass == "channel_blocks_inside_pixels";
      Operands got = make_operands(p, seed);
      got.x.fill(std::numeric_limits<double>::quiet_NaN());
      ASSERT_TRUE(interpret(nest, got.ptrs(), ParallelFor(threaded_for)).is_ok());
      EXPECT_TRUE(convjit::testing::all_close(got.x.view(), ref.x.view(), tol)) << print(nest);
    });
    EXPECT_TRUE(sunk);
    ++seed;
  }
}

// A 3-channel stem's bfloat16 input gradient on the same AMX core takes channel tiles (3 of
// a tile's 16 columns), not W-position tiles: the final nest matches the reference.
TEST(IrChannelBlocks, StemChannelTilesOnAmxMatchTheReference) {
  const TestTarget amx = testing::avx512_bf16_target(true, 2);
  const ConvProblem p =
      make_problem({2, 12, 40, 3, 5, 5, 3, 16, 2, 2, 1, 1, Padding::kSame},
                   ConvDirection::kBackpropData, DType::kBFloat16, DataFormat::kNHWC);
  ASSERT_FALSE(testing::plan_for(p, amx).position_vectors);
  expect_input_gradient_matches(p, lower_and_schedule(p, amx), 51);
}

// Input gradients whose packed filter outgrows L2 (a core with 32 KiB of it) walk each
// thread's chunk of images inside the channel blocks: 5 images on 2 threads (chunks of 2 and
// an image left), 200 input channels (blocks and a tail), f32 and bfloat16, 1x1 and 3x3 at
// stride 2. The final nest, threaded,
// matches the reference.
TEST(IrChannelBlocks, AroundEachThreadsImagesMatchTheReference) {
  TestTarget small_l2 = testing::avx512_bf16_target(false, 2);
  small_l2.l2_bytes = 32 << 10;
  const std::vector<Geometry> cases = {
      {5, 4, 4, 200, 1, 1, 200, 64, 1, 1, 1, 1, Padding::kValid},
      {5, 7, 9, 200, 3, 3, 200, 24, 2, 2, 1, 1, Padding::kSame},
  };
  std::uint64_t seed = 61;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const Geometry& g : cases) {
      const ConvProblem p = make_problem(g, ConvDirection::kBackpropData, dtype, DataFormat::kNHWC);
      SCOPED_TRACE(fmt::format("{} {}x{} filter", dtype_name(dtype), g.kh, g.kw));
      const CpuPlan plan = testing::plan_for(p, small_l2);
      ASSERT_TRUE(plan.channel_blocks_around_batch) << plan.describe();
      const LoopNest nest = lower_and_schedule(p, small_l2);
      EXPECT_TRUE(nest.derived.contains("channel_blocks_around_batch")) << nest.schedule_summary;
      expect_input_gradient_matches(p, nest, seed);
      ++seed;
    }
  }
}

// On two threads each packing copy of an input gradient's filter runs as one band of output
// channels per thread (whole lines: 32 f32 rows or 16 bfloat16 pairs of 72 channels), a
// parallel loop of its own, and the rows past the last whole band (8, or 4 pairs) as the nest
// they were; 1x1 and 3x3 filters, with and without channel blocks. The final nest, threaded,
// matches the reference; one thread keeps the copy unbanded.
TEST(IrPackingBands, ThreadsSplitBandsOfWholeLinesAndTheRestMatchesTheReference) {
  const std::vector<Geometry> cases = {
      {3, 5, 6, 200, 1, 1, 200, 72, 1, 1, 1, 1, Padding::kValid},
      {2, 5, 7, 24, 3, 3, 24, 72, 2, 2, 1, 1, Padding::kSame},
  };
  std::uint64_t seed = 71;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const Geometry& g : cases) {
      const ConvProblem p = make_problem(g, ConvDirection::kBackpropData, dtype, DataFormat::kNHWC);
      SCOPED_TRACE(fmt::format("{} {}x{} filter", dtype_name(dtype), g.kh, g.kw));
      const TestTarget two = testing::avx512_bf16_target(false, 2);
      ASSERT_TRUE(testing::plan_for(p, two).pack_filter);
      const LoopNest nest = lower_and_schedule(p, two);
      const std::string text = print(nest);
      int bands = 0;
      for (const Stmt& s : nest.body) {
        const auto* l = std::get_if<Loop>(&s.node);
        if (l == nullptr || l->label != "packing bands") continue;
        ++bands;
        EXPECT_EQ(l->kind, LoopKind::kParallel) << text;
        EXPECT_EQ(l->trip_count(), 2) << text;
      }
      EXPECT_GE(bands, 1) << text;
      expect_input_gradient_matches(p, nest, seed);
      EXPECT_EQ(
          print(lower_and_schedule(p, testing::avx512_bf16_target(false, 1))).find("packing bands"),
          std::string::npos);
      ++seed;
    }
  }
}

// Interprets a filter-gradient nest on `threads` threads and compares dW with the reference.
void expect_filter_gradient_matches(const ConvProblem& p, const LoopNest& nest, int threads,
                                    std::uint64_t seed) {
  Operands ref = make_operands(p, seed);
  run_reference(p, ref.ptrs());
  Operands got = make_operands(p, seed);
  got.w.fill(std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(
      interpret(nest, got.ptrs(), threads > 1 ? ParallelFor(threaded_for) : ParallelFor(serial_for))
          .is_ok());
  EXPECT_TRUE(convjit::testing::all_close(
      got.w.view(), ref.w.view(),
      convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p))));
}

// An AVX2 core (whatever the host) with `threads` threads and an L2 of `l2_bytes`.
TestTarget avx2_target(int threads, std::int64_t l2_bytes) {
  TestTarget t = generic_target(threads);
  t.isa = Isa::kAvx2;
  t.vector_bytes = 32;
  t.vector_registers = 16;
  t.has_fma = t.has_f16c = true;
  t.l2_bytes = l2_bytes;
  return t;
}

// A bfloat16 NHWC filter gradient of `g` and its schedule for the AMX test core with
// `threads` threads and an L2 of `l2_bytes`.
struct AmxFilterGradient {
  ConvProblem problem;
  LoopNest nest;
};
AmxFilterGradient amx_filter_gradient(const Geometry& g, int threads, std::int64_t l2_bytes) {
  TestTarget amx = testing::avx512_bf16_target(true, threads);
  amx.l2_bytes = l2_bytes;
  const ConvProblem p =
      make_problem(g, ConvDirection::kBackpropFilter, DType::kBFloat16, DataFormat::kNHWC);
  return {p, lower_and_schedule(p, amx)};
}

// How many elements of an image of dy a slot's copy holds (the pair or widened scratch).
std::int64_t copied_dy_extent(const LoopNest& nest) {
  for (const Buffer& b : nest.buffers) {
    if (b.name == "dyq" || b.name == "dyw") return b.dims[2];
  }
  return -1;
}

// Bfloat16 filter gradients on an avx512_bf16 target take the batch two images at a time in
// every schedule form: unblocked tiles reducing over the images (one thread, and a chunk of
// images per thread), and block_reduction's batch loops (a small L2 forces them), with an odd
// image left to the unpaired tiles, and a batch that does not divide among the threads (or
// divides into an odd number of images each), split by rows, where each thread copies only
// the rows it reads; and threads that each own a slice of dW's output channels, each pairing
// all the images (copying the windows of dy its channels lie in). A blocked image too large
// for half the L2 is copied chunk by chunk: dy's rows per chunk of output rows. Where no pair
// forms (one image) the f32 tiles read dy widened per image instead. The threaded cases
// other than the slices have activations large enough next to dW that the threads split the
// reduction. Each final nest matches the reference.
TEST(IrBatchOperandCopies, EveryScheduleFormTakesImagesInPairs) {
  struct Case {
    std::int64_t n, hw, c, oc;
    int threads;
    std::int64_t l2_bytes;
    bool last_image;  // an odd image in a batch loop runs unpaired
    bool paired = true;
    bool window = false;  // the copies hold only the rows (or channels) of dy a slot reads
    bool sliced = false;  // the threads own slices of dW's output channels
  };
  const Case cases[] = {
      {4, 6, 3, 18, 1, 1 << 20, false},                      // unblocked, one thread
      {4, 24, 16, 32, 2, 1 << 20, false},                    // unblocked, two images per thread
      {5, 6, 3, 18, 1, 4096, true},                          // blocked: two pairs and a last image
      {6, 24, 16, 32, 2, 4096, false, true, true},           // 3 images per thread: rows split
      {8, 40, 32, 32, 3, 1 << 20, false, true, true},        // 8 % 3 images: rows split
      {4, 64, 16, 32, 1, 4096, false, true, true},           // blocked: dy copied per row chunk
      {1, 6, 3, 18, 1, 1 << 20, false, false},               // one image
      {2, 36, 16, 32, 2, 1 << 20, false, true, true},        // 1 image per thread: rows split
      {2, 24, 16, 32, 4, 1 << 20, false, true, true},        // rows split: a window of each pair
      {4, 12, 16, 32, 2, 1 << 20, false, true, true, true},  // output slices, all images each
      {2, 12, 16, 32, 2, 4096, false, true, true, true}};    // output slices, blocked
  std::uint64_t seed = 301;
  for (const Case& c : cases) {
    const Geometry g{c.n, c.hw, c.hw - 1, c.c, 3, 2, c.c, c.oc, 1, 2, 1, 1, Padding::kSame};
    const ConvProblem p =
        make_problem(g, ConvDirection::kBackpropFilter, DType::kBFloat16, DataFormat::kNHWC);
    TestTarget t = generic_target(c.threads);
    t.isa = Isa::kAvx512;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_fma = t.has_f16c = t.has_avx512_bf16 = true;
    t.l2_bytes = c.l2_bytes;
    const LoopNest nest = lower_and_schedule(p, t);
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    EXPECT_EQ(nest.schedule_summary.find("par=") != std::string::npos, c.threads > 1);
    EXPECT_EQ(nest.schedule_summary.find("slice=ocx") != std::string::npos, c.sliced);
    EXPECT_EQ(nest.schedule_summary.find("dp2n") != std::string::npos, c.paired);
    EXPECT_EQ(text.find("\"image pairs\"") != std::string::npos, c.paired);
    EXPECT_EQ(text.find("buffer xq scratch bfloat16") != std::string::npos, c.paired);
    EXPECT_EQ(text.find("\"last image\"") != std::string::npos, c.last_image);
    // A paired tile prints its second product: "+ xq[..] * dyq[..]".
    EXPECT_EQ(text.find(" + xq[") != std::string::npos, c.paired);
    EXPECT_EQ(std::regex_search(nest.schedule_summary, std::regex(R"(\bwx?dy\b)")), !c.paired);
    EXPECT_EQ(text.find("buffer dyw scratch float32") != std::string::npos, !c.paired);
    EXPECT_EQ(copied_dy_extent(nest) < p.oh * p.ow * p.oc, c.window);
    // Scratch per thread: f32 partial sums and one interleaved pair of x and dy images (an
    // unblocked batch, which fits in half the L2, may hold all of its pairs).
    const std::int64_t filter = p.kh * p.kw * p.filter_in * p.oc;
    const std::int64_t pair = 2 * (p.ih * p.iw * p.ic + p.oh * p.ow * p.oc);
    const std::int64_t unblocked = c.l2_bytes > 4096 ? c.l2_bytes : 0;
    EXPECT_LE(nest.scratch_bytes(), c.threads * (4 * filter + 2 * pair) + unblocked);

    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

// One image has no partner image, so where block_reduction cuts it into row chunks, a bfloat16
// filter gradient on an avx512_bf16 target pairs consecutive chunks instead (dp2h): per pair,
// the rows of x and dy the first chunk's tiles read are interleaved with those one chunk
// further down, and the tiles read both from the copies. A loop of one chunk (the borders')
// and an odd last chunk are paired with zeros, in both operands. Where no two chunks pair
// (three chunks, each its own loop), the f32 tiles on widened copies stay. In one thread, rows
// split among threads, at a row stride of 2, and in output-channel slices, each final nest
// matches the reference, and Inf and NaN planted in x and dy reach exactly the elements of dW
// the formula sends them to: both members of a pair are rows of the image, never padding, and
// a zero partner is zero in x and in dy.
TEST(IrBatchOperandCopies, OneImagePairsItsRowChunks) {
  struct Case {
    std::int64_t hw, c, oc, sh;
    int threads;
    bool paired;
    bool last_chunk;  // an odd number of chunks in the loop of inner chunks
    bool sliced = false;
  };
  // An L2 of 32 KiB blocks these images into chunks of 4 rows.
  const Case cases[] = {
      {12, 16, 32, 1, 1, false, false},      // three chunks, each a loop of its own
      {16, 16, 32, 1, 1, true, false},       // two inner chunks: a pair
      {20, 16, 32, 1, 1, true, true},        // three inner chunks: a pair and a last chunk
      {32, 16, 32, 2, 1, true, true},        // stride 2: x's pairs two chunks of rows apart
      {32, 16, 32, 1, 2, true, true},        // rows split between two threads
      {24, 16, 32, 1, 2, true, false, true}  // two threads, each a slice of dW's output channels
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::uint64_t seed = 401;
  for (const Case& c : cases) {
    const Geometry g{1, c.hw, 64, c.c, 3, 2, c.c, c.oc, c.sh, 1, 1, 1, Padding::kSame};
    const ConvProblem p =
        make_problem(g, ConvDirection::kBackpropFilter, DType::kBFloat16, DataFormat::kNHWC);
    TestTarget t = testing::avx512_bf16_target(false, c.threads);
    t.l2_bytes = 32768;
    const LoopNest nest = lower_and_schedule(p, t);
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    EXPECT_EQ(nest.schedule_summary.find("dp2h") != std::string::npos, c.paired);
    EXPECT_EQ(nest.schedule_summary.find("slice=ocx") != std::string::npos, c.sliced);
    EXPECT_EQ(text.find("\"row pairs\"") != std::string::npos, c.paired);
    EXPECT_EQ(text.find("\"last row chunk\"") != std::string::npos, c.last_chunk);
    EXPECT_EQ(text.find(" + xq[") != std::string::npos, c.paired);
    // Zero partners: the second member of both operands' copies.
    EXPECT_EQ(std::regex_search(text, std::regex(R"(store xq\[[^\n]*, 1\] = 0\n)")), c.paired);
    EXPECT_EQ(std::regex_search(text, std::regex(R"(store dyq\[[^\n]*, 1\] = 0\n)")), c.paired);
    EXPECT_EQ(text.find("buffer dyw scratch float32") != std::string::npos, !c.paired);
    // A pair's copies hold a chunk's rows, not the image.
    EXPECT_LT(copied_dy_extent(nest), p.oh * p.ow * p.oc / 2);
    expect_filter_gradient_matches(p, nest, c.threads, seed);

    for (const TensorRole planted : {TensorRole::kX, TensorRole::kY}) {
      for (const double value : {inf, -inf, std::numeric_limits<double>::quiet_NaN()}) {
        Operands ref = make_operands(p, seed);
        TestTensor& at = planted == TensorRole::kX ? ref.x : ref.y;
        // A pixel in the middle of the image (a row the pairs take), channel 1.
        const std::int64_t channels = planted == TensorRole::kX ? p.ic : p.oc;
        at.set((at.elements() / 2 / channels) * channels + 1, value);
        Operands got = ref;
        run_reference(p, ref.ptrs());
        got.w.fill(0.5);
        ASSERT_TRUE(interpret(nest, got.ptrs(),
                              c.threads > 1 ? ParallelFor(threaded_for) : ParallelFor(serial_for))
                        .is_ok());
        for (std::int64_t i = 0; i < got.w.elements(); ++i) {
          const double want = ref.w.get(i), have = got.w.get(i);
          ASSERT_EQ(std::isnan(have), std::isnan(want)) << "dW element " << i << ": " << have;
          ASSERT_EQ(std::isinf(have), std::isinf(want)) << "dW element " << i << ": " << have;
        }
      }
    }
    ++seed;
  }
}

// Without the dot product (AVX2 here, or f16 anywhere), a 16-bit filter gradient widens each
// image's dy once into the thread's slot instead of every dy vector at every point of the
// reduction, in every schedule form, each thread's or row chunk's rows where they are fewer;
// and x likewise where its elements are broadcast often. Each final nest matches the
// reference.
TEST(IrBatchOperandCopies, WithoutTheDotProductDyIsWidenedPerImage) {
  struct Case {
    std::int64_t n, hw, c, oc;
    int threads;
    std::int64_t l2_bytes;
    bool window = false;  // the copy holds only the rows (or channels) of dy a slot reads
    bool sliced = false;  // the threads own slices of dW's output channels
  };
  const Case cases[] = {{3, 6, 3, 18, 1, 1 << 20},          // unblocked, one thread
                        {4, 24, 16, 32, 2, 1 << 20},        // unblocked, two images per thread
                        {5, 6, 3, 18, 1, 4096},             // blocked
                        {6, 24, 16, 32, 2, 32768, true},    // blocked, three images per thread
                        {1, 48, 16, 32, 2, 1 << 20, true},  // rows split: each thread's window
                        {4, 24, 16, 32, 1, 32768, true},    // blocked: per row chunk
                        {4, 12, 16, 32, 2, 1 << 20, true, true}};  // output slices
  std::uint64_t seed = 401;
  for (const DType dtype : {DType::kBFloat16, DType::kHalf}) {
    for (const Case& c : cases) {
      const Geometry g{c.n, c.hw, c.hw - 1, c.c, 3, 2, c.c, c.oc, 1, 2, 1, 1, Padding::kSame};
      const ConvProblem p =
          make_problem(g, ConvDirection::kBackpropFilter, dtype, DataFormat::kNHWC);
      const LoopNest nest = lower_and_schedule(p, avx2_target(c.threads, c.l2_bytes));
      const std::string text = print(nest);
      SCOPED_TRACE(text);
      // x too where each element is broadcast often (32 output channels: 96 FMAs per x
      // element over 16-lane tile rows; a slice's 16 are too few); then no tile reads x itself
      // either.
      const bool x_widened = c.oc == 32 && !c.sliced;
      EXPECT_EQ(nest.schedule_summary.find("slice=ocx") != std::string::npos, c.sliced);
      EXPECT_NE(nest.schedule_summary.find(x_widened ? "wxdy" : " wdy"), std::string::npos);
      EXPECT_NE(text.find("buffer dyw scratch float32"), std::string::npos);
      EXPECT_EQ(text.find("* dy["), std::string::npos);  // no tile reads dy itself
      EXPECT_EQ(copied_dy_extent(nest) < p.oh * p.ow * p.oc, c.window);
      EXPECT_EQ(text.find("buffer xw scratch float32") != std::string::npos, x_widened);
      EXPECT_EQ(std::regex_search(text, std::regex(R"(= x\[[^\n]* \* )")), !x_widened);
      const std::int64_t filter = p.kh * p.kw * p.filter_in * p.oc;
      const std::int64_t images = p.oh * p.ow * p.oc + p.ih * p.iw * p.ic;
      const std::int64_t unblocked = c.l2_bytes > 4096 ? c.l2_bytes : 0;
      EXPECT_LE(nest.scratch_bytes(), c.threads * 4 * (filter + images) + unblocked);

      expect_filter_gradient_matches(p, nest, c.threads, seed++);
    }
  }
}

// An AVX2 target (1 MiB of L2) or the host's AVX-512 one, for `threads` threads.
TestTarget avx2_or_avx512_target(bool avx2, int threads) {
  return avx2 ? avx2_target(threads, 1 << 20) : host_target(Isa::kAvx512, threads);
}

// A 16-bit depthwise filter gradient whose x and dy elements each meet many taps (5x5 and
// 7x7 filters at stride 1) reads both widened to f32 once per image; a 3x3 filter's, a
// strided 5x5's and a depth multiplier's tiles keep widening their loads. On AVX2 and AVX-512
// targets, one thread and two; each final nest matches the reference.
TEST(IrBatchOperandCopies, DepthwiseOperandsMetByManyTapsAreWidenedPerImage) {
  struct Case {
    std::int64_t k, stride, multiplier;
    bool widened;
  };
  const Case cases[] = {
      {7, 1, 1, true}, {5, 1, 1, true}, {3, 1, 1, false}, {5, 2, 1, false}, {5, 1, 2, false}};
  std::uint64_t seed = 431;
  for (const DType dtype : {DType::kBFloat16, DType::kHalf}) {
    for (const Case& c : cases) {
      for (const int threads : {1, 2}) {
        for (const bool avx2 : {true, false}) {
          const Geometry g{
              4, 12, 11, 24, c.k, c.k, 1, c.multiplier, c.stride, c.stride, 1, 1, Padding::kSame,
              0, 0,  0,  0,  true};
          const ConvProblem p =
              make_problem(g, ConvDirection::kBackpropFilter, dtype, DataFormat::kNHWC);
          const LoopNest nest = lower_and_schedule(p, avx2_or_avx512_target(avx2, threads));
          const std::string text = print(nest);
          SCOPED_TRACE(text);
          EXPECT_EQ(nest.schedule_summary.find("wxdy") != std::string::npos, c.widened)
              << nest.schedule_summary;
          if (c.widened) {
            EXPECT_EQ(text.find("* dy["), std::string::npos);  // no tile reads dy itself
            EXPECT_FALSE(std::regex_search(text, std::regex(R"(= x\[[^\n]* \* )")));
          }
          expect_filter_gradient_matches(p, nest, threads, seed++);
        }
      }
    }
  }
}

// A depthwise filter gradient with a depth multiplier (NHWC) takes vectors along the channels
// over a de-interleaved copy of dy, the multiplier's outputs as tile rows (deint), not the
// multiplier's few lanes as vectors; the copy holds one image per thread (privatized in
// parallelize), and dW's lanes, M apart, are written by the tiles. Channel counts with tails,
// strides, every dtype, one thread and two, AVX2 and AVX-512; each final nest matches the
// reference.
TEST(IrDepthMultiplier, FilterGradientTilesRunAlongTheChannelsOfADeinterleavedDy) {
  struct Case {
    std::int64_t c, multiplier, k, stride;
  };
  const Case cases[] = {{8, 2, 3, 1}, {24, 3, 5, 1}, {40, 2, 3, 2}, {17, 4, 1, 1}};
  std::uint64_t seed = 911;
  for (const DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kHalf}) {
    for (const Case& c : cases) {
      for (const int threads : {1, 2}) {
        for (const bool avx2 : {true, false}) {
          const Geometry g{
              4, 9, 7, c.c, c.k, c.k, 1, c.multiplier, c.stride, c.stride, 1, 1, Padding::kSame,
              0, 0, 0, 0,   true};
          const ConvProblem p =
              make_problem(g, ConvDirection::kBackpropFilter, dtype, DataFormat::kNHWC);
          const LoopNest nest = lower_and_schedule(p, avx2_or_avx512_target(avx2, threads));
          const std::string text = print(nest);
          SCOPED_TRACE(text);
          EXPECT_NE(nest.schedule_summary.find("deint" + std::to_string(c.multiplier)),
                    std::string::npos)
              << nest.schedule_summary;
          EXPECT_EQ(text.find("* dy["), std::string::npos);  // no tile reads dy itself
          EXPECT_TRUE(std::regex_search(text, std::regex(R"(tile r:\d+ x v:([89]|\d\d))")));
          const auto copy = std::find_if(nest.buffers.begin(), nest.buffers.end(),
                                         [](const Buffer& b) { return b.name == "dyd"; });
          ASSERT_NE(copy, nest.buffers.end());
          EXPECT_LE(copy->dims.front(), threads);  // one image per thread, not the batch
          expect_filter_gradient_matches(p, nest, threads, seed++);
        }
      }
    }
  }
  // Without a channel loop (one channel) the multiplier's lanes stay the vectors.
  const Geometry one{2, 5, 5, 1, 3, 3, 1, 3, 1, 1, 1, 1, Padding::kSame, 0, 0, 0, 0, true};
  const ConvProblem p =
      make_problem(one, ConvDirection::kBackpropFilter, DType::kFloat32, DataFormat::kNHWC);
  const LoopNest nest = lower_and_schedule(p, host_target(Isa::kAvx512, 1));
  EXPECT_EQ(nest.schedule_summary.find("deint"), std::string::npos) << nest.schedule_summary;
  expect_filter_gradient_matches(p, nest, 1, seed);
}

// f32 and f64 filter gradients whose x or dy pixels are a multiple of 512 bytes apart (their
// lines would crowd a few L1 sets) read copies of them with every pixel padded by whole lines,
// in every schedule form: unblocked, blocked per row chunk, chunks of several images, output-
// or input-channel slices (whose copies take the slice's channels of each pixel); a stride
// reads x every other pixel, and only the crowded operand is copied. The widened 16-bit copies
// take the same padding. Each final nest matches the reference.
TEST(IrBatchOperandCopies, CrowdedPixelsAreCopiedWithPadding) {
  struct Case {
    Geometry g;
    DType dtype;
    int threads;
    std::int64_t l2_bytes;
    const char* tokens;  // the schedule's kernel-name tokens
  };
  const Case cases[] = {
      {{4, 6, 6, 128, 1, 1, 128, 256, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 1, 1 << 20,
       "r3x32 rsxdy"},
      {{2, 16, 16, 128, 3, 3, 128, 256, 1, 1, 1, 1, Padding::kSame}, DType::kFloat32, 1,
       64 << 10, "blk=n,oh8 rsxdy"},
      {{8, 7, 7, 512, 1, 1, 512, 512, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 1,
       1 << 20, "blk=n2 rsxdy"},
      // dW past this L2 in rows under a page: slices of input channels.
      {{3, 7, 6, 48, 3, 3, 48, 256, 2, 2, 1, 1, Padding::kSame}, DType::kFloat32, 2, 8192,
       "slice=icx2 rsdy"},
      {{1, 9, 8, 40, 3, 3, 40, 128, 1, 1, 1, 1, Padding::kSame}, DType::kFloat32, 2, 1 << 20,
       "slice=ocx2 rsdy"},
      {{2, 5, 5, 256, 1, 1, 256, 512, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 2, 1 << 20,
       "slice=ocx2 rsxdy"},
      // Each thread's copies (all of dy, its slice of x) outweigh its slice of dW but not the
      // whole dW: still copied.
      {{4, 5, 5, 128, 1, 1, 128, 512, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 2,
       128 << 10, "slice=icx2 rsxdy"},
      {{4, 5, 4, 64, 3, 3, 64, 64, 1, 1, 1, 1, Padding::kSame}, DType::kFloat64, 2, 8192,
       "slice=icx2 rsxdy"},
      {{4, 6, 6, 128, 1, 1, 128, 128, 1, 1, 1, 1, Padding::kValid}, DType::kHalf, 1, 8192,
       "blk=n acc=partial wxdy"}};
  std::uint64_t seed = 451;
  for (const Case& c : cases) {
    const ConvProblem p =
        make_problem(c.g, ConvDirection::kBackpropFilter, c.dtype, DataFormat::kNHWC);
    const LoopNest nest = lower_and_schedule(p, avx2_target(c.threads, c.l2_bytes));
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    EXPECT_NE(nest.schedule_summary.find(c.tokens), std::string::npos) << nest.schedule_summary;
    EXPECT_EQ(text.find("* dy["), std::string::npos);  // no tile reads dy itself
    // dy's copy, [slot][image][pixel][channel] (a slice's slot in front of output slices):
    // consecutive pixels reach at least 16 line positions of the 4 KiB an L1 way spans.
    bool spread = false;
    for (const Buffer& b : nest.buffers) {
      if ((b.name == "dyr" || b.name == "dyw") && b.strides.size() >= 4) {
        const std::int64_t pixel = b.strides[b.strides.size() - 2] * dtype_size(b.dtype);
        spread = 4096 / std::gcd(pixel, std::int64_t{4096}) >= 16;
      }
    }
    EXPECT_TRUE(spread);
    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

// A 1x1 filter gradient whose x or dy image outgrows the copies' budget (half the L2, where
// the copies would go per row chunk) reads the tensors themselves on a core whose L2 fills L1
// a line a cycle: the tiles' L1 misses at one tap per element hide under the FMAs there. At
// half a line a cycle (Zen 1-4), or where the images fit the budget, the padded copies stay,
// as they do for 3x3 filters (the test above). Every nest, threaded, matches the reference.
TEST(IrBatchOperandCopies, OneByOneImagesPastTheCopyBudgetAreNotCopiedWhereL2FillsFast) {
  struct Case {
    Geometry g;
    DType dtype;
    int threads;
    std::int64_t l2_bytes;
    double l2_fill_bytes_per_cycle;
    bool copied;
  };
  const Case cases[] = {
      // x 128 KiB and dy 256 KiB an image.
      {{2, 16, 16, 128, 1, 1, 128, 256, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 1,
       64 << 10, 64, false},
      {{2, 16, 16, 128, 1, 1, 128, 256, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 1,
       64 << 10, 32, true},
      {{2, 16, 16, 128, 1, 1, 128, 256, 1, 1, 1, 1, Padding::kValid}, DType::kFloat32, 1,
       1 << 20, 64, true},
      // Stride 2: x's window is its whole image; f64 images twice the bytes.
      {{4, 12, 12, 128, 1, 1, 128, 256, 2, 2, 1, 1, Padding::kValid}, DType::kFloat32, 2,
       64 << 10, 64, false},
      {{2, 6, 6, 128, 1, 1, 128, 64, 1, 1, 1, 1, Padding::kValid}, DType::kFloat64, 2, 64 << 10,
       64, false},
      {{2, 6, 6, 128, 1, 1, 128, 64, 1, 1, 1, 1, Padding::kValid}, DType::kFloat64, 2, 1 << 20,
       64, true}};
  std::uint64_t seed = 977;
  for (const Case& c : cases) {
    const ConvProblem p =
        make_problem(c.g, ConvDirection::kBackpropFilter, c.dtype, DataFormat::kNHWC);
    TestTarget target = avx2_target(c.threads, c.l2_bytes);
    target.l2_fill_bytes_per_cycle = c.l2_fill_bytes_per_cycle;
    const LoopNest nest = lower_and_schedule(p, target);
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    const bool rs = nest.schedule_summary.find(" rs") != std::string::npos;
    EXPECT_EQ(rs, c.copied) << nest.schedule_summary;
    EXPECT_EQ(text.find("* dy[") == std::string::npos, c.copied);  // tiles read dy or its copy
    bool scratch_copies = false;
    for (const Buffer& b : nest.buffers) {
      scratch_copies = scratch_copies || b.name == "xr" || b.name == "dyr";
    }
    EXPECT_EQ(scratch_copies, c.copied);
    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

// On AMX, dy's image pairs whose pixels crowd the L1's sets (128 and 256 output channels: 512
// and 1024 bytes of pairs a pixel) are copied with each pixel padded by a line, in every
// schedule form: output- and input-channel slices (at a stride of 2), unblocked with each
// thread's row blocks rereading its slice of dy (rdy), blocked into f32 partial sums by images
// or by row chunks. Each final nest, threaded, matches the reference.
TEST(IrBatchOperandCopies, AmxPairsOfCrowdedDyArePadded) {
  struct Case {
    Geometry g;
    int threads;
    std::int64_t l2_bytes;
    const char* tokens;  // the schedule's kernel-name tokens
  };
  const Case cases[] = {
      {{2, 6, 6, 64, 3, 3, 64, 128, 1, 1, 1, 1, Padding::kSame}, 2, 64 << 10, "slice=ocx2"},
      {{2, 40, 40, 32, 3, 3, 32, 128, 1, 1, 1, 1, Padding::kSame},
       2,
       1 << 20,
       "blk=n,oh20 acc=partial par=slice slice=ocx2"},
      {{2, 32, 32, 32, 1, 1, 32, 128, 1, 1, 1, 1, Padding::kValid},
       1,
       16 << 10,
       "blk=n acc=partial"},
      {{2, 5, 34, 64, 3, 3, 64, 128, 2, 2, 1, 1, Padding::kSame}, 2, 1 << 20, "slice=icx2"},
      {{4, 6, 6, 128, 3, 3, 128, 128, 1, 1, 1, 1, Padding::kSame},
       2,
       32 << 10,
       "rdy par=slice slice=ocx2"},
      {{8, 12, 12, 32, 3, 3, 32, 256, 1, 1, 1, 1, Padding::kSame},
       2,
       256 << 10,
       "blk=n acc=partial par=slice slice=ocx2"}};
  std::uint64_t seed = 471;
  for (const Case& c : cases) {
    const auto [p, nest] = amx_filter_gradient(c.g, c.threads, c.l2_bytes);
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    EXPECT_NE(nest.schedule_summary.find(c.tokens), std::string::npos) << nest.schedule_summary;
    EXPECT_NE(nest.schedule_summary.find("dp2t,ypad16"), std::string::npos);
    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

// AMX's copy of x's pairs by channel stages one row of x at a time: each row's pair is
// interleaved into xq just before the transposing copy reads it back, so xq holds one row,
// never the window's pair. Where the window's copy ends inside its last row (an input-channel
// slice's window ends at its last pixel's slice), that row has a loop of its own staging only
// the copied part. Unblocked, per row chunk and sliced forms; each nest, threaded, matches the
// reference.
TEST(IrBatchOperandCopies, AmxPairsByChannelAreStagedRowByRow) {
  struct Case {
    Geometry g;
    int threads;
    std::int64_t l2_bytes;
    bool partial_last_row;
  };
  const Case cases[] = {
      {{4, 10, 20, 32, 3, 3, 32, 64, 1, 1, 1, 1, Padding::kSame}, 2, 1 << 20, false},
      {{2, 40, 24, 32, 3, 3, 32, 128, 1, 1, 1, 1, Padding::kSame}, 1, 64 << 10, false},
      {{2, 9, 20, 64, 3, 3, 64, 64, 2, 2, 1, 1, Padding::kSame}, 2, 8 << 10, true},
      {{4, 6, 18, 64, 1, 1, 64, 32, 1, 1, 1, 1, Padding::kValid}, 2, 16 << 10, true}};
  std::uint64_t seed = 983;
  for (const Case& c : cases) {
    const auto [p, nest] = amx_filter_gradient(c.g, c.threads, c.l2_bytes);
    const std::string text = print(nest);
    SCOPED_TRACE(text);
    ASSERT_NE(nest.schedule_summary.find("dp2t"), std::string::npos) << nest.schedule_summary;
    const Buffer& x = nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(BufferKind::kX))];
    for (const Buffer& b : nest.buffers) {
      if (b.name == "xq") EXPECT_EQ(b.dims[b.dims.size() - 2], x.strides[1]);  // one row
    }
    // The last row's own loop starts past the first row.
    EXPECT_EQ(std::regex_search(
                  text, std::regex(R"(for xg\w* in \[[1-9][0-9]*, [0-9]+\) "pairs by channel")")),
              c.partial_last_row);
    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

// AMX filter gradients whose f32 partial sums outgrow L2 and whose dy pairs are padded grow
// their row chunks past the L1 cap, while a pair of images' chunk stays within L2's share:
// VGG16's 56x56x256 3x3 layer in chunks of 10 rows, not 5; with the partial sums in L2 (r50's
// 28x28 1x1 from 512 channels to 128) the L1 cap stays. (The chunks are the blocked forms the
// other tests interpret; only their rows change.)
TEST(IrReductionBlocking, AmxChunksGrowWhereThePartialSumsLeaveL2) {
  const TestTarget amx = testing::avx512_bf16_target(true, 2);
  auto summary = [&](const Geometry& g) {
    const ConvProblem p =
        make_problem(g, ConvDirection::kBackpropFilter, DType::kBFloat16, DataFormat::kNHWC);
    return lower_and_schedule(p, amx).schedule_summary;
  };
  EXPECT_NE(summary({4, 56, 56, 256, 3, 3, 256, 256, 1, 1, 1, 1, Padding::kSame})
                .find("blk=n,oh10 acc=partial"),
            std::string::npos);
  EXPECT_NE(
      summary({8, 28, 28, 512, 1, 1, 512, 128, 1, 1, 1, 1, Padding::kValid}).find("blk=n,oh10"),
      std::string::npos);
}

// Threads that each own a slice of dW (where the filter outweighs the activations) run the
// schedule of one slice on windows of the op's tensors, each slice with scratch of its own (the
// NCHW copy of dy, image pairs, widened images, rounding partial sums); where the activations
// outweigh dW the threads split the reduction instead. Output- and input-channel slices, every
// dtype, both layouts, strides and dilations, batches the threads do not divide, 2 to 4
// threads. Each final nest matches the reference.
TEST(IrOutputSlices, ThreadsOwnSlicesOfFiltersThatOutweighTheActivations) {
  struct Case {
    Geometry g;
    DType dtype;
    DataFormat format;
    int threads;
    const char* slices;  // the kernel name's token, nullptr: the reduction splits
  };
  const Case cases[] = {
      {{2, 5, 5, 16, 3, 3, 16, 64, 1, 1, 1, 1, Padding::kSame}, DType::kFloat32,
       DataFormat::kNHWC, 2, "slice=ocx2"},
      // 40 output channels do not divide among 3 threads; one image does not either.
      {{1, 5, 5, 48, 3, 3, 48, 40, 1, 1, 1, 1, Padding::kSame}, DType::kFloat32,
       DataFormat::kNHWC, 3, "slice=icx3"},
      {{3, 8, 8, 64, 1, 1, 64, 128, 1, 1, 1, 1, Padding::kValid}, DType::kBFloat16,
       DataFormat::kNHWC, 4, "slice=ocx4"},
      {{2, 12, 10, 64, 3, 2, 64, 64, 2, 1, 1, 2, Padding::kSame}, DType::kHalf, DataFormat::kNCHW,
       2, "slice=icx2"},
      {{2, 6, 6, 16, 3, 3, 16, 32, 1, 1, 1, 1, Padding::kSame}, DType::kFloat64,
       DataFormat::kNCHW, 2, "slice=ocx2"},
      {{2, 8, 7, 32, 3, 3, 32, 32, 1, 1, 1, 1, Padding::kSame}, DType::kBFloat16,
       DataFormat::kNCHW, 2, "slice=ocx2"},
      {{4, 40, 40, 8, 3, 3, 8, 16, 1, 1, 1, 1, Padding::kSame}, DType::kFloat32,
       DataFormat::kNHWC, 2, nullptr}};
  std::uint64_t seed = 501;
  for (const Case& c : cases) {
    const ConvProblem p = make_problem(c.g, ConvDirection::kBackpropFilter, c.dtype, c.format);
    TestTarget t = generic_target(c.threads);
    t.isa = Isa::kAvx512;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_fma = t.has_f16c = t.has_avx512_bf16 = true;
    const LoopNest nest = lower_and_schedule(p, t);
    SCOPED_TRACE(print(nest));
    if (c.slices != nullptr) {
      EXPECT_NE(nest.schedule_summary.find(c.slices), std::string::npos);
      EXPECT_EQ(nest.schedule_summary.find("split="), std::string::npos);
      // One parallel loop over the slices holds everything; every scratch has a slot per slice.
      ASSERT_EQ(nest.body.size(), 1u);
      const auto* slices = std::get_if<Loop>(&nest.body[0].node);
      ASSERT_NE(slices, nullptr);
      EXPECT_EQ(slices->kind, LoopKind::kParallel);
      EXPECT_EQ(slices->trip_count(), c.threads);
      for (const Buffer& b : nest.buffers) {
        if (b.kind == BufferKind::kScratch) EXPECT_EQ(b.dims[0], c.threads) << b.name;
      }
    } else {
      EXPECT_EQ(nest.schedule_summary.find("slice="), std::string::npos);
      EXPECT_NE(nest.schedule_summary.find("split="), std::string::npos);
    }
    expect_filter_gradient_matches(p, nest, c.threads, seed++);
  }
}

std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> out;
  for (auto dir : {ConvDirection::kForward, ConvDirection::kBackpropData, ConvDirection::kBackpropFilter}) {
    for (auto dt : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kHalf}) {
      out.push_back({dir, dt});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, IrScheduleSweep, ::testing::ValuesIn(sweep_params()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return fmt::format("{}_{}", direction_name(info.param.dir),
                                              dtype_name(info.param.dtype));
                         });

}  // namespace
}  // namespace convjit::cpu
