// Loading x86 code a previous compile produced (what a disk cache hit does): the stored bytes
// and load info rebuild a kernel that computes bit for bit what the freshly generated one
// does, from other (read+execute, never writable) pages, so the code must be position
// independent; a load info that does not describe code for this target, or does not fit the
// bytes, is refused before anything runs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "codegen/x86/kernel_layout.hpp"
#include "codegen/x86/x86_backend.hpp"
#include "frontend/validate.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "reference/naive.hpp"
#include "support/test_tensors.hpp"

namespace convjit::codegen {
namespace {

using convjit::testing::TestTensor;

struct Case {
  std::string label;
  OpKind op;
  DType dtype;
  DataFormat format;
  std::vector<std::int64_t> input;  // in data_format order
  std::vector<std::int64_t> filter;
  std::int64_t stride;
  int threads;
};

ConvProblem problem_of(const Case& c) {
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.dtype = c.dtype;
  d.data_format = c.format;
  d.input = c.input;
  d.filter = c.filter;
  d.strides = c.format == DataFormat::kNHWC ? std::vector<std::int64_t>{1, c.stride, c.stride, 1}
                                            : std::vector<std::int64_t>{1, 1, c.stride, c.stride};
  d.padding = Padding::kSame;
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.status().to_string());
  ConvProblem problem = *p;
  problem.op = c.op;
  problem.direction = c.op == OpKind::kConv2DBackpropFilter ? ConvDirection::kBackpropFilter
                                                            : ConvDirection::kBackpropData;
  return problem;
}

// A packed filter (scratch), a split reduction over three threads (parallel functions and
// partial sums), and bfloat16 results (rounding constants read rip-relative from the code).
std::vector<Case> cases() {
  return {
      {"bwd_data_nhwc_f32", OpKind::kConv2DBackpropInput, DType::kFloat32, DataFormat::kNHWC,
       {2, 9, 9, 16}, {3, 3, 16, 24}, 1, 1},
      {"bwd_filter_nhwc_f32_threads", OpKind::kConv2DBackpropFilter, DType::kFloat32,
       DataFormat::kNHWC, {2, 10, 10, 8}, {3, 3, 8, 16}, 1, 3},
      {"bwd_data_nchw_bf16_s2", OpKind::kConv2DBackpropInput, DType::kBFloat16, DataFormat::kNCHW,
       {1, 5, 11, 13}, {3, 3, 5, 7}, 2, 2},
  };
}

bool host_has_avx2() { return cpu::CpuInfo::host(cpu::Isa::kAvx2).isa == cpu::Isa::kAvx2; }

// The layout text x86 code stores beside its bytes.
std::string load_info_of(const CompiledCode& code) {
  const Artifacts artifacts = code.artifacts();
  const auto info = artifacts.find(kLoadArtifactName);
  return info == artifacts.end() ? std::string() : std::string(info->second.begin(), info->second.end());
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

std::vector<std::int64_t> to_vec(const std::array<std::int64_t, 4>& a) { return {a.begin(), a.end()}; }

// Runs `code` on seeded operands; returns the output tensor.
TestTensor run_on(const CompiledCode& code, const ConvProblem& p, bool threaded) {
  const TensorRole out_role = p.output_role();
  TestTensor x(p.dtype, to_vec(p.shape(TensorRole::kX)));
  TestTensor w(p.dtype, to_vec(p.shape(TensorRole::kW)));
  TestTensor y(p.dtype, to_vec(p.shape(TensorRole::kY)));
  std::uint64_t seed = 5;
  for (auto [role, t] : {std::pair{TensorRole::kX, &x}, {TensorRole::kW, &w}, {TensorRole::kY, &y}}) {
    if (role != out_role) *t = convjit::testing::random_tensor(p.dtype, t->shape(), seed++);
  }
  TestTensor* out = out_role == TensorRole::kX ? &x : out_role == TensorRole::kW ? &w : &y;
  out->fill(std::numeric_limits<double>::quiet_NaN());
  const Status st =
      code.run({x.data(), w.data(), y.data()}, RunContext{threaded ? thread_for() : ParallelFor(serial_for)});
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  // The reference on the same inputs, for the caller's tolerance check.
  TestTensor result = *out;
  TestTensor ref = *out;
  OperandPointers ops{x.data(), w.data(), y.data()};
  if (out_role == TensorRole::kX) ops.x = ref.data();
  if (out_role == TensorRole::kW) ops.w = ref.data();
  if (out_role == TensorRole::kY) ops.y = ref.data();
  run_reference(p, ops);
  const auto tol = convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p));
  EXPECT_TRUE(convjit::testing::all_close(result.view(), ref.view(), tol));
  return result;
}

bool pages_are_read_execute(const void* code) {
  const auto addr = reinterpret_cast<std::uintptr_t>(code);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (addr >= lo && addr < hi) return perms[0] == 'r' && perms[1] == '-' && perms[2] == 'x';
  }
  return false;
}

TEST(X86Load, LoadedCodeComputesWhatGeneratedCodeDoes) {
  if (!host_has_avx2()) GTEST_SKIP() << "needs AVX2";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const ConvProblem p = problem_of(c);
    const cpu::CpuInfo target = cpu::CpuInfo::host(cpu::Isa::kAvx512);
    auto generated = x86::emit_nest(cpu::lower_and_schedule(p, target, c.threads), target);
    ASSERT_TRUE(generated.has_value()) << generated.status().to_string();
    const std::string info = load_info_of(**generated);
    ASSERT_FALSE(info.empty());
    // The stored bytes as a disk cache would hand them over: a plain copy.
    const std::span<const std::uint8_t> original = (*generated)->code_bytes();
    const std::vector<std::uint8_t> stored(original.begin(), original.end());
    auto loaded = x86::load_code(stored, info, target);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();

    EXPECT_EQ((*loaded)->name(), (*generated)->name());
    EXPECT_EQ((*loaded)->scratch_bytes(), (*generated)->scratch_bytes());
    EXPECT_EQ(load_info_of(**loaded), info);
    ASSERT_EQ((*loaded)->code_bytes().size(), stored.size());
    EXPECT_EQ(std::memcmp((*loaded)->code_bytes().data(), stored.data(), stored.size()), 0);
    EXPECT_NE((*loaded)->code_bytes().data(), original.data());
    EXPECT_TRUE(pages_are_read_execute((*loaded)->code_bytes().data()));

    const bool threaded = c.threads > 1;
    const TestTensor want = run_on(**generated, p, threaded);
    // Generated code gone: the loaded copy must not lean on anything the generator owned.
    generated = internal_error("released");
    const TestTensor got = run_on(**loaded, p, threaded);
    ASSERT_EQ(got.elements(), want.elements());
    const auto bytes = static_cast<std::size_t>(got.elements()) * dtype_size(got.dtype());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "not bit-identical";
  }
}

// The load info of a small kernel, and its code.
struct Stored {
  std::vector<std::uint8_t> code;
  std::string info;
};

Stored stored_kernel(const cpu::CpuInfo& target) {
  const ConvProblem p = problem_of(cases()[1]);
  auto code = x86::emit_nest(cpu::lower_and_schedule(p, target, 3), target);
  EXPECT_TRUE(code.has_value());
  if (!code) return {};
  return {{(*code)->code_bytes().begin(), (*code)->code_bytes().end()}, load_info_of(**code)};
}

std::string replace_line(const std::string& text, const std::string& prefix, const std::string& by) {
  const std::size_t at = text.find("\n" + prefix);
  EXPECT_NE(at, std::string::npos) << prefix;
  const std::size_t end = text.find('\n', at + 1);
  return text.substr(0, at + 1) + by + text.substr(end);
}

TEST(X86Load, RefusesLoadInfoThatDoesNotFit) {
  const cpu::CpuInfo avx2 = cpu::CpuInfo::host(cpu::Isa::kAvx2);
  if (avx2.isa != cpu::Isa::kAvx2) GTEST_SKIP() << "needs AVX2";
  const Stored s = stored_kernel(avx2);
  ASSERT_FALSE(s.code.empty());
  ASSERT_TRUE(x86::load_code(s.code, s.info, avx2).has_value());

  auto refused = [&](std::span<const std::uint8_t> code, const std::string& info) {
    auto r = x86::load_code(code, info, avx2);
    return r.has_value() ? std::string() : r.status().message();
  };
  // Code generated for another target.
  EXPECT_NE(refused(s.code, replace_line(s.info, "isa ", "isa avx512")).find("is for avx512"),
            std::string::npos);
  // Bytes that are not the code the layout describes.
  const std::vector<std::uint8_t> shorter(s.code.begin(), s.code.end() - 1);
  EXPECT_NE(refused(shorter, s.info).find("bytes"), std::string::npos);
  // An entry point outside the code.
  EXPECT_NE(refused(s.code, s.info + fmt::format("function {} serial 1\n", s.code.size()))
                .find("bad function entry"),
            std::string::npos);
  // A scratch slot outside the scratch block.
  if (s.info.find("buffer scratch ") != std::string::npos) {
    EXPECT_NE(refused(s.code, replace_line(s.info, "buffer scratch ",
                                           "buffer scratch 0 999999999999"))
                  .find("outside the scratch block"),
              std::string::npos);
  }
  // Another format, garbage, nothing.
  EXPECT_NE(refused(s.code, "convjit-x86-kernel 2" + s.info.substr(s.info.find('\n')))
                .find("unknown layout version"),
            std::string::npos);
  EXPECT_FALSE(refused(s.code, "\x7f" "ELF garbage").empty());
  EXPECT_FALSE(refused(s.code, "").empty());
  EXPECT_FALSE(refused({}, s.info).empty());
}

TEST(X86Load, LayoutRoundTripsThroughText) {
  x86::KernelLayout layout;
  layout.name = "x86_avx2_f32_bwd_filter_nhwc_r2x32";
  layout.isa = "avx2";
  layout.code_size = 4096;
  layout.buffers = {ir::BufferKind::kX, ir::BufferKind::kW, ir::BufferKind::kY,
                    ir::BufferKind::kScratch, ir::BufferKind::kScratch};
  layout.scratch = {{3, 0, 100}, {4, 128, 64}};
  layout.scratch_bytes = 192;
  layout.functions = {{0, false, 1}, {512, true, 56}, {2048, true, 0}};
  const std::string text = x86::serialize_layout(layout);
  Expected<x86::KernelLayout> parsed = x86::parse_layout(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string() << "\n" << text;
  EXPECT_EQ(*parsed, layout);
  EXPECT_EQ(x86::serialize_layout(*parsed), text);
}

}  // namespace
}  // namespace convjit::codegen
