// The x86 backend end to end: every op direction x dtype x layout x a few attribute sets goes
// through lower_and_schedule, must be accepted by the backend (no interpreter fallback), and
// its JIT result must match both the interpreter on the same nest and the naive reference,
// at both ISAs (AVX-512 where the host has it, and AVX2), serially and threaded.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "codegen/x86/x86_backend.hpp"
#include "frontend/validate.hpp"
#include "ir/interpreter.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "reference/naive.hpp"
#include "support/test_tensors.hpp"

namespace convjit::codegen {
namespace {

using convjit::testing::TestTensor;

struct Geometry {
  std::string label;
  std::int64_t n, h, w, c, kh, kw;
  std::int64_t filter_in;  // depthwise: ignored
  std::int64_t out;        // oc, or the depth multiplier for depthwise
  std::int64_t sh, sw, dh, dw;
  Padding padding;
  std::vector<std::int64_t> pads;  // EXPLICIT: top, bottom, left, right
  bool depthwise = false;
};

std::vector<std::int64_t> in_format(DataFormat f, std::int64_t n, std::int64_t h, std::int64_t w,
                                    std::int64_t c) {
  return f == DataFormat::kNHWC ? std::vector<std::int64_t>{n, h, w, c}
                                : std::vector<std::int64_t>{n, c, h, w};
}

// The forward op of the geometry, validated; the backprop problems share every size with it.
ConvProblem make_problem(const Geometry& g, ConvDirection dir, DType dtype, DataFormat format) {
  OpDescriptor d;
  d.op = g.depthwise ? OpKind::kDepthwiseConv2dNative : OpKind::kConv2D;
  d.dtype = dtype;
  d.data_format = format;
  d.input = in_format(format, g.n, g.h, g.w, g.c);
  d.filter = {g.kh, g.kw, g.depthwise ? g.c : g.filter_in, g.out};
  d.strides = in_format(format, 1, g.sh, g.sw, 1);
  d.dilations = in_format(format, 1, g.dh, g.dw, 1);
  d.padding = g.padding;
  if (g.padding == Padding::kExplicit) {
    d.explicit_paddings = format == DataFormat::kNHWC
                              ? std::vector<std::int64_t>{0, 0, g.pads[0], g.pads[1], g.pads[2], g.pads[3], 0, 0}
                              : std::vector<std::int64_t>{0, 0, 0, 0, g.pads[0], g.pads[1], g.pads[2], g.pads[3]};
  }
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << (p.has_value() ? "" : p.status().to_string());
  ConvProblem problem = *p;
  problem.direction = dir;
  if (dir == ConvDirection::kBackpropData) {
    problem.op = g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropInput : OpKind::kConv2DBackpropInput;
  } else if (dir == ConvDirection::kBackpropFilter) {
    problem.op = g.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropFilter : OpKind::kConv2DBackpropFilter;
  }
  return problem;
}

std::vector<std::int64_t> to_vec(const std::array<std::int64_t, 4>& a) { return {a.begin(), a.end()}; }

// On a host without AVX-512 the AVX-512 kernels are still scheduled and generated (they must
// be accepted and assemble), but not run.
std::vector<cpu::CpuInfo> targets() {
  std::vector<cpu::CpuInfo> out;
  cpu::CpuInfo avx512 = cpu::CpuInfo::host(cpu::Isa::kAvx512);
  if (avx512.isa != cpu::Isa::kAvx512) {
    avx512.isa = cpu::Isa::kAvx512;
    avx512.vector_bytes = 64;
    avx512.vector_registers = 32;
    avx512.has_fma = avx512.has_f16c = avx512.has_avx512_bf16 = true;
  }
  out.push_back(avx512);
  // Every way of multiplying bfloat16 runs wherever the host has vdpbf16ps: its paired tiles,
  // widening to f32 (what a core that runs vdpbf16ps slower than its FMAs gets) and, on a
  // host with AMX (the host's own target then), the data gradient's tiles on AMX.
  if (avx512.has_avx512_bf16) {
    cpu::CpuInfo dot = avx512;
    dot.has_amx_bf16 = false;
    dot.bf16_dot_beats_fma = true;
    cpu::CpuInfo widen = dot;
    widen.bf16_dot_beats_fma = false;
    for (const cpu::CpuInfo& t : {dot, widen}) {
      if (t.name() != avx512.name()) out.push_back(t);
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

// Runs one problem through the x86 backend, scheduled for `threads`; returns an assertion with
// the kernel's name.
// `out_offset` >= 0 places the JIT's output that many bytes past a cache line's start
// (TestTensor's own storage starts on one); `name`, when given, receives the kernel's name.
::testing::AssertionResult check_problem(const ConvProblem& p, const cpu::CpuInfo& target,
                                         int threads, bool threaded, std::int64_t out_offset = -1,
                                         std::string* name = nullptr) {
  const ir::LoopNest nest = cpu::lower_and_schedule(p, target, threads);
  std::string why;
  if (!x86::can_emit(nest, target, &why)) return ::testing::AssertionFailure() << "refused: " << why;
  Expected<std::unique_ptr<CompiledCode>> code = x86::emit_nest(nest, target);
  if (!code) return ::testing::AssertionFailure() << code.status().to_string();
  if (name != nullptr) *name = (*code)->name();
  if (cpu::CpuInfo::host(target.isa).isa != target.isa) return ::testing::AssertionSuccess();

  const TensorRole out_role = p.output_role();
  TestTensor x(p.dtype, to_vec(p.shape(TensorRole::kX)));
  TestTensor w(p.dtype, to_vec(p.shape(TensorRole::kW)));
  TestTensor y(p.dtype, to_vec(p.shape(TensorRole::kY)));
  std::uint64_t seed = 11;
  for (auto [role, t] : {std::pair{TensorRole::kX, &x}, {TensorRole::kW, &w}, {TensorRole::kY, &y}}) {
    if (role != out_role) *t = convjit::testing::random_tensor(p.dtype, t->shape(), seed++);
  }
  TestTensor* out = out_role == TensorRole::kX ? &x : out_role == TensorRole::kW ? &w : &y;
  TestTensor jit_out = *out, interp_out = *out, ref_out = *out;
  jit_out.fill(std::numeric_limits<double>::quiet_NaN());  // catches unwritten outputs
  auto ops = [&](TestTensor* result) {
    OperandPointers o{x.data(), w.data(), y.data()};
    if (out_role == TensorRole::kX) o.x = result->data();
    if (out_role == TensorRole::kW) o.w = result->data();
    if (out_role == TensorRole::kY) o.y = result->data();
    return o;
  };
  const ParallelFor pf = threaded ? thread_for() : ParallelFor(serial_for);
  if (out_offset < 0) {
    const Status st = (*code)->run(ops(&jit_out), RunContext{pf});
    if (!st) return ::testing::AssertionFailure() << st.to_string();
  } else {
    const auto bytes = static_cast<std::size_t>(jit_out.elements() * dtype_size(p.dtype));
    std::vector<std::byte, CacheLineAllocator<std::byte>> shifted(
        bytes + static_cast<std::size_t>(out_offset));
    std::byte* at = shifted.data() + out_offset;
    std::memcpy(at, jit_out.data(), bytes);
    OperandPointers o = ops(&jit_out);
    (out_role == TensorRole::kX ? o.x : out_role == TensorRole::kW ? o.w : o.y) = at;
    const Status st = (*code)->run(o, RunContext{pf});
    if (!st) return ::testing::AssertionFailure() << st.to_string();
    std::memcpy(jit_out.data(), at, bytes);
  }
  const Status ist = ir::interpret(nest, ops(&interp_out));
  if (!ist) return ::testing::AssertionFailure() << ist.to_string();
  run_reference(p, ops(&ref_out));

  const auto tol = convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p));
  auto r1 = convjit::testing::all_close(jit_out.view(), interp_out.view(), tol);
  if (!r1) return r1 << " (vs interpreter, kernel " << (*code)->name() << ")";
  auto r2 = convjit::testing::all_close(jit_out.view(), ref_out.view(), tol);
  if (!r2) return r2 << " (vs reference, kernel " << (*code)->name() << ")";
  return ::testing::AssertionSuccess();
}

std::vector<Geometry> geometries() {
  return {
      {"same_3x3", 2, 7, 9, 5, 3, 3, 5, 6, 1, 1, 1, 1, Padding::kSame, {}},
      {"valid_s2", 1, 9, 8, 16, 3, 3, 16, 32, 2, 2, 1, 1, Padding::kValid, {}},
      {"explicit_dil2", 2, 8, 7, 4, 3, 2, 4, 19, 1, 2, 2, 1, Padding::kExplicit, {1, 2, 0, 3}},
      {"same_s3_wide", 1, 10, 11, 24, 2, 3, 24, 40, 3, 2, 1, 1, Padding::kSame, {}},
      {"grouped", 1, 6, 6, 8, 3, 3, 4, 6, 1, 1, 1, 1, Padding::kSame, {}},
      {"rgb_first_layer", 1, 9, 9, 3, 5, 5, 3, 20, 2, 2, 1, 1, Padding::kSame, {}},
      {"depthwise_m2_s2", 2, 8, 9, 6, 3, 3, 1, 2, 2, 2, 1, 1, Padding::kSame, {}, true},
      {"depthwise_m1", 1, 7, 7, 35, 3, 3, 1, 1, 1, 1, 1, 1, Padding::kValid, {}, true},
      {"pointwise", 2, 5, 5, 33, 1, 1, 33, 17, 1, 1, 1, 1, Padding::kValid, {}},
      // 1x1 at stride 1 schedules each image's pixels as one row: grouped and depthwise too.
      {"pointwise_grouped", 2, 4, 6, 12, 1, 1, 4, 9, 1, 1, 1, 1, Padding::kSame, {}},
      {"pointwise_depthwise_m2", 2, 3, 5, 10, 1, 1, 1, 2, 1, 1, 1, 1, Padding::kValid, {}, true},
      // 7 and 15 channels: AVX2 tails of 7 lanes (the widest partial load).
      {"tails_of_seven", 1, 6, 5, 7, 3, 2, 7, 15, 1, 1, 1, 1, Padding::kSame, {}},
      // Backprop data's channel blocks: inside each row with a partial block (72 channels), and
      // around the whole image (a filter too large to stay in L2 between rows).
      {"channel_blocks_rows", 1, 5, 6, 72, 3, 3, 72, 24, 1, 1, 1, 1, Padding::kSame, {}},
      {"channel_blocks_image", 1, 4, 5, 136, 3, 3, 136, 128, 2, 1, 1, 1, Padding::kSame, {}},
      // Two channels across a wide row: the data gradient's W-vector form over a zero-padded
      // transposed dy (small_odd's kind).
      {"few_channels_wide", 2, 7, 23, 2, 3, 5, 2, 7, 2, 2, 1, 1, Padding::kSame, {}},
      // NCHW depthwise: 14-wide planes (rows of H, a vector and an overlapping one), and wide
      // stride-2 rows with an even filter width (repeated dy columns, per-column weights,
      // whole vectors and a tail of the repeated copy).
      {"depthwise_plane_14", 2, 14, 14, 4, 3, 3, 1, 1, 1, 1, 1, 1, Padding::kSame, {}, true},
      // NCHW's channels-last copies of dy and dx as 8x8 register transposes, with leftover
      // rows and columns on both (19 wide, 20 and 12 channels).
      {"channels_last_transposes", 2, 5, 19, 20, 3, 3, 20, 12, 1, 1, 1, 1, Padding::kSame, {}},
      {"depthwise_wide_s2", 1, 6, 37, 3, 3, 4, 1, 2, 2, 2, 1, 1, Padding::kSame, {}, true},
      // Filter gradients whose pixels are a multiple of 512 bytes apart in x (read at stride 2)
      // and dy: their batch copies pad every pixel (f32, f64, and the widened 16-bit types).
      {"padded_pixels_s2", 2, 6, 7, 128, 1, 1, 128, 256, 2, 2, 1, 1, Padding::kValid, {}},
      {"padded_pixels_3x3", 3, 5, 6, 64, 3, 3, 64, 128, 1, 1, 1, 1, Padding::kSame, {}},
  };
}

class X86EndToEnd : public ::testing::TestWithParam<std::tuple<ConvDirection, DType>> {};

TEST_P(X86EndToEnd, MatchesInterpreterAndReference) {
  const auto [dir, dtype] = GetParam();
  for (const cpu::CpuInfo& target : targets()) {
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      for (const Geometry& g : geometries()) {
        const ConvProblem p = make_problem(g, dir, dtype, format);
        for (bool threaded : {false, true}) {
          EXPECT_TRUE(check_problem(p, target, 2, threaded))
              << g.label << " " << target.name() << " " << data_format_name(format)
              << (threaded ? " threaded" : " serial");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, X86EndToEnd,
    ::testing::Combine(::testing::Values(ConvDirection::kForward, ConvDirection::kBackpropData,
                                         ConvDirection::kBackpropFilter),
                       ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kBFloat16,
                                         DType::kHalf)),
    [](const auto& info) {
      return fmt::format("{}_{}", direction_name(std::get<0>(info.param)),
                         dtype_name(std::get<1>(info.param)));
    });

// Non-temporal output stores, on a target whose last-level cache every output outgrows: the
// output at a cache line's start takes the streaming stores, and 4 or 32 bytes past one (where
// vmovntps would fault) the same kernel must take its plain stores instead.
TEST(X86EndToEndStream, StreamedOutputsMatchWhereverTheOutputStarts) {
  int streamed = 0;
  for (cpu::CpuInfo target : targets()) {
    target.llc_bytes = 0;
    for (ConvDirection dir : {ConvDirection::kForward, ConvDirection::kBackpropData}) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kHalf}) {
        for (const Geometry& g : geometries()) {
          // NCHW: the channels-last dx copied back streams (8x16 transposed blocks).
          for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
            const ConvProblem p = make_problem(g, dir, dtype, format);
            for (std::int64_t offset : {0, 4, 32}) {
              std::string name;
              EXPECT_TRUE(check_problem(p, target, 2, offset == 0, offset, &name))
                  << g.label << " " << target.name() << " " << data_format_name(format)
                  << " offset " << offset;
              if (name.find("_nt") != std::string::npos) ++streamed;
            }
          }
        }
      }
    }
  }
  // Most geometries have whole-line tiles of their channels; a test that streamed nothing
  // would check nothing.
  EXPECT_GE(streamed, 30);
}

// Empty problems: the nest is a zero fill of the output.
TEST(X86EndToEndEmpty, ZeroFillsTheOutput) {
  Geometry g{"empty_batch", 0, 5, 5, 4, 3, 3, 4, 8, 1, 1, 1, 1, Padding::kSame, {}};
  for (const cpu::CpuInfo& target : targets()) {
    for (ConvDirection dir : {ConvDirection::kBackpropData, ConvDirection::kBackpropFilter}) {
      const ConvProblem p = make_problem(g, dir, DType::kFloat32, DataFormat::kNHWC);
      EXPECT_TRUE(check_problem(p, target, 1, false)) << direction_name(dir);
    }
  }
}

}  // namespace
}  // namespace convjit::codegen
