// Inf and NaN in an operand reach exactly the outputs TensorFlow's formula sends them to: every
// backend and schedule skips padding taps instead of multiplying them by zero (0 x Inf would turn
// an unrelated output into NaN). Each case plants a non-finite value in one operand, runs the
// op on every backend this host runs, and compares each output element's class (NaN, +Inf,
// -Inf, finite) with the naive reference's.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_info.hpp"
#include "codegen/x86/x86_backend.hpp"
#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"
#include "runtime/kernel.hpp"
#include "support/test_conv_cases.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

using testing::ConvCase;
using testing::TestTensor;

enum class ValueClass { kFinite, kNaN, kPlusInf, kMinusInf };

ValueClass class_of(double v) {
  if (std::isnan(v)) return ValueClass::kNaN;
  if (std::isinf(v)) return v > 0 ? ValueClass::kPlusInf : ValueClass::kMinusInf;
  return ValueClass::kFinite;
}

// Geometries whose borders take padding taps: SAME and EXPLICIT padding, strides, dilations,
// few and many channels (the W-vector and channel-vector forms), depthwise with multipliers.
std::vector<ConvCase> cases() {
  std::vector<ConvCase> out;
  auto add = [&](ConvCase c) { out.push_back(c); };
  ConvCase c;
  c.n = 2;
  c.h = 9;
  c.w = 11;
  c.c = 3;
  c.kh = c.kw = 3;
  c.filter_in = 3;
  c.filter_out = 8;
  c.padding = Padding::kSame;
  add(c);  // few channels: W vectors
  c.c = c.filter_in = 16;
  c.filter_out = 16;
  add(c);  // channel vectors
  c.stride_h = c.stride_w = 2;
  add(c);  // stride residues
  c.stride_h = c.stride_w = 1;
  c.dilation_h = c.dilation_w = 2;
  c.padding = Padding::kExplicit;
  c.pad_top = 2;
  c.pad_bottom = 1;
  c.pad_left = 3;
  c.pad_right = 2;
  add(c);
  ConvCase d;
  d.n = 2;
  d.h = d.w = 14;
  d.c = 8;
  d.kh = d.kw = 3;
  d.filter_in = 1;
  d.filter_out = 1;
  d.depthwise = true;
  d.padding = Padding::kSame;
  add(d);  // depthwise
  d.stride_h = d.stride_w = 2;
  add(d);  // depthwise at stride 2
  d.filter_out = 2;
  d.stride_h = d.stride_w = 1;
  d.kh = d.kw = 4;
  add(d);  // a depth multiplier, an even filter
  // bfloat16 with channel vectors: where the host has avx512_bf16, vdpbf16ps takes the input
  // gradient's output channels and the filter gradient's images in pairs (both members real
  // data: a pair never multiplies a padding tap).
  const std::size_t dense = out.size();
  for (std::size_t i = 0; i < dense; ++i) {
    if (out[i].depthwise || out[i].c != 16) continue;
    ConvCase h = out[i];
    h.dtype = DType::kBFloat16;
    out.push_back(h);
  }
  std::vector<ConvCase> both;
  for (ConvCase x : out) {
    for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      x.format = f;
      both.push_back(x);
    }
  }
  return both;
}

std::vector<OpKind> ops_for(const ConvCase& c) {
  if (c.depthwise) {
    return {OpKind::kDepthwiseConv2dNative, OpKind::kDepthwiseConv2dNativeBackpropInput,
            OpKind::kDepthwiseConv2dNativeBackpropFilter};
  }
  return {OpKind::kConv2D, OpKind::kConv2DBackpropInput, OpKind::kConv2DBackpropFilter};
}

// The interpreter, and the x86 backend at every ISA this host runs.
struct Backend {
  std::string name;
  cpu::Isa isa = cpu::Isa::kGeneric;
};

std::vector<Backend> backends() {
  std::vector<Backend> out = {{"interpreter", cpu::Isa::kGeneric}};
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (cpu::CpuInfo::host(isa).isa == isa) out.push_back({"x86", isa});
  }
  return out;
}

// Runs `desc` on `backend` (the x86 one made for its ISA directly: the runtime takes the
// process's ISA cap).
void run_on(const Backend& backend, const OpDescriptor& desc, TestTensor& a, TestTensor& b,
            TestTensor& out, std::string* name, std::int64_t l2_bytes = 0) {
  if (backend.name == "interpreter") {
    CompileOptions options;
    options.backend = backend.name;
    options.num_threads = 2;
    const Kernel kernel = compile(desc, options);
    *name = kernel.name();
    kernel.run(a.view(), b.view(), out.view());
    return;
  }
  const Expected<ConvProblem> p = validate(desc);
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  cpu::CpuInfo cpu = cpu::CpuInfo::host(backend.isa);
  if (l2_bytes > 0) cpu.l2_bytes = l2_bytes;
  const std::unique_ptr<codegen::Backend> x86 = codegen::make_x86_backend(cpu);
  codegen::PlanOptions options;
  options.num_threads = 2;
  auto generated = codegen::compile(*x86, *p, options);
  ASSERT_TRUE(generated.has_value()) << generated.status().to_string();
  // Through the disk cache's path: the code (and an exact twin, where it has one) mapped again
  // from its artifacts.
  auto code = x86->load((*generated)->artifacts());
  ASSERT_TRUE(code.has_value()) << code.status().to_string();
  ASSERT_EQ((*code)->name(), (*generated)->name());
  *name = (*code)->name();
  const auto roles = runtime::operand_roles(p->direction);
  OperandPointers ops;
  void* data[3] = {a.data(), b.data(), out.data()};
  for (int i = 0; i < 3; ++i) {
    switch (roles[static_cast<std::size_t>(i)]) {
      case TensorRole::kX: ops.x = data[i]; break;
      case TensorRole::kW: ops.w = data[i]; break;
      case TensorRole::kY: ops.y = data[i]; break;
    }
  }
  codegen::RunContext context;
  ASSERT_TRUE((*code)->run(ops, context).is_ok());
}

// Runs `desc` on `backend` with operand `planted` holding `value` at element `at`, and compares
// the output's classes with the reference's. Returns a failure naming the first mismatch.
::testing::AssertionResult classes_match(const ConvCase& c, OpKind op, const Backend& backend,
                                         int planted, std::int64_t at, double value,
                                         std::int64_t l2_bytes = 0) {
  const OpDescriptor desc = c.descriptor(op);
  const auto shapes = c.operand_shapes(op);
  TestTensor a = testing::random_tensor(c.dtype, shapes[0], 7);
  TestTensor b = testing::random_tensor(c.dtype, shapes[1], 8);
  TestTensor& target = planted == 0 ? a : b;
  target.set(at % target.elements(), value);
  TestTensor got(c.dtype, shapes[2]);
  TestTensor want(c.dtype, shapes[2]);
  got.fill(0.5);
  std::string name;
  run_on(backend, desc, a, b, got, &name, l2_bytes);
  run_reference(desc, a.view(), b.view(), want.view());
  for (std::int64_t i = 0; i < got.elements(); ++i) {
    if (class_of(got.get(i)) != class_of(want.get(i))) {
      return ::testing::AssertionFailure()
             << name << ": output " << i << " is " << got.get(i) << ", the reference "
             << want.get(i) << " (operand " << planted << " element " << at % target.elements()
             << " = " << value << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(NonFinite, InfAndNanReachOnlyTheOutputsTheFormulaSendsThemTo) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const ConvCase& c : cases()) {
    for (OpKind op : ops_for(c)) {
      for (const Backend& backend : backends()) {
        SCOPED_TRACE(fmt::format("{} {}", to_text(c.descriptor(op)), backend.name));
        // Each operand, at its first element (a border of every tensor: the first filter tap,
        // the top-left pixel) and at one in its middle, with Inf and with NaN.
        for (int planted : {0, 1}) {
          for (std::int64_t at : {std::int64_t{0}, std::int64_t{37}}) {
            for (double value : {inf, -inf, nan}) {
              EXPECT_TRUE(classes_match(c, op, backend, planted, at, value));
            }
          }
        }
      }
    }
  }
}

// One image's bfloat16 filter gradient where vdpbf16ps runs (the host has avx512_bf16): an L2
// of 16 KiB cuts the image into row chunks, which pair with each other and, at the borders
// and an odd last chunk, with zeros in both operands (dp2h). Non-finite values anywhere in x
// and dy, the borders' rows included, reach only the elements of dW the formula sends them to.
TEST(NonFinite, RowChunkPairsOfOneImageTakeNoPaddingIntoAPair) {
  const Backend avx512{"x86", cpu::Isa::kAvx512};
  const cpu::CpuInfo host = cpu::CpuInfo::host(cpu::Isa::kAvx512);
  if (host.isa != cpu::Isa::kAvx512 || !host.uses_bf16_dot()) {
    GTEST_SKIP() << "the host runs no vdpbf16ps (avx512_bf16): the schedule is interpreted in "
                    "IrBatchOperandCopies.OneImagePairsItsRowChunks";
  }
  ConvCase c;
  c.dtype = DType::kBFloat16;
  c.n = 1;
  c.h = 49;
  c.w = 64;
  c.c = c.filter_in = 16;
  c.filter_out = 32;
  c.kh = 3;
  c.kw = 2;
  c.padding = Padding::kSame;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int planted : {0, 1}) {
    // The first element (the top border chunk's), one in the middle, and the last (the bottom
    // border chunk's).
    for (std::int64_t at : {std::int64_t{0}, std::int64_t{24 * 64 * 16 + 5}, std::int64_t{-1}}) {
      for (double value : {inf, -inf, nan}) {
        const std::int64_t elements = planted == 0 ? c.n * c.h * c.w * c.c : c.n * c.h * c.w * 32;
        EXPECT_TRUE(classes_match(c, OpKind::kConv2DBackpropFilter, avx512, planted,
                                  at < 0 ? elements - 1 : at, value, /*l2_bytes=*/16384));
      }
    }
  }
  std::string name;
  TestTensor a = testing::random_tensor(c.dtype, c.input_shape(), 1);
  TestTensor b = testing::random_tensor(c.dtype, c.output_shape(), 2);
  TestTensor out(c.dtype, c.filter_shape());
  run_on(avx512, c.descriptor(OpKind::kConv2DBackpropFilter), a, b, out, &name, 16384);
  EXPECT_NE(name.find("_dp2h"), std::string::npos) << name;
}

}  // namespace
}  // namespace convjit
