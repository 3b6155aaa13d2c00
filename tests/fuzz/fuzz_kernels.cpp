// libFuzzer target over whole kernels: each input becomes one small valid descriptor of any op,
// dtype, layout and attribute (strides up to 10^9, dilations, SAME/VALID/EXPLICIT padding,
// groups, depth multipliers, empty tensors), which is compiled (x86 backend, sometimes the
// interpreter; one or two threads) and run on tensors that each end exactly at an
// inaccessible page, with inputs that sometimes hold Inf or NaN. The result is compared with
// the naive reference element by element and NaN-aware: the same class (NaN, +Inf, -Inf,
// finite) everywhere, finite values within the dtype's tolerance. Any difference, refusal of a
// valid descriptor or fault prints the descriptor and aborts, so libFuzzer keeps the input.
//
// CONVJIT_FUZZ_STRICT_NAN (environment, 0 or 1; default from the CMake option of the same
// name, on): when 0, an input-gradient kernel whose filter or out_backprop holds Inf or NaN may
// give NaN where the reference does not (padding taps multiplied as zeros, 0 x Inf = NaN,
// which the schedules no longer do; the seed corpus keeps the inputs that once showed it);
// such runs are counted and reported at exit instead of failing. Every other check, and
// every other op, stays strict.
#include <fuzzer/FuzzedDataProvider.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "guarded_tensor.hpp"
#include "support/test_conv_cases.hpp"

#ifndef CONVJIT_FUZZ_STRICT_NAN_DEFAULT
#define CONVJIT_FUZZ_STRICT_NAN_DEFAULT 1
#endif

namespace convjit::fuzz {
namespace {

using testing::ConvCase;

constexpr OpKind kOps[] = {
    OpKind::kConv2D,
    OpKind::kConv2DBackpropInput,
    OpKind::kConv2DBackpropInputV2,
    OpKind::kConv2DBackpropFilter,
    OpKind::kDepthwiseConv2dNative,
    OpKind::kDepthwiseConv2dNativeBackpropInput,
    OpKind::kDepthwiseConv2dNativeBackpropFilter,
};
constexpr DType kDTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
constexpr Padding kPaddings[] = {Padding::kSame, Padding::kValid, Padding::kExplicit};

bool strict_nan() {
  static const bool strict = [] {
    const char* v = std::getenv("CONVJIT_FUZZ_STRICT_NAN");
    if (v == nullptr || v[0] == '\0') return CONVJIT_FUZZ_STRICT_NAN_DEFAULT != 0;
    return std::strcmp(v, "0") != 0;
  }();
  return strict;
}

std::atomic<std::uint64_t> g_runs{0}, g_tolerated_nan{0};

bool is_input_gradient(OpKind op) {
  return op == OpKind::kConv2DBackpropInput || op == OpKind::kConv2DBackpropInputV2 ||
         op == OpKind::kDepthwiseConv2dNativeBackpropInput;
}

bool is_forward(OpKind op) { return op == OpKind::kConv2D || op == OpKind::kDepthwiseConv2dNative; }

// Where Inf and NaN go: up to three elements of operand a and/or b.
struct Special {
  int operand = 0;  // 0: a, 1: b
  std::uint32_t position = 0;
  double value = 0;
};

struct Case {
  OpKind op = OpKind::kConv2D;
  ConvCase geometry;
  std::string backend = "x86";
  int threads = 1;
  std::uint64_t seed = 0;
  std::vector<Special> specials;
};

std::int64_t stride_from(FuzzedDataProvider& in) {
  // Mostly small; now and then far beyond the image (every residue but one is empty).
  const std::uint8_t b = in.ConsumeIntegral<std::uint8_t>();
  if (b >= 240) return b >= 250 ? 1000000000 : 2147483647;
  return 1 + b % 4;
}

Case generate(FuzzedDataProvider& in) {
  Case c;
  c.op = in.PickValueInArray(kOps);
  ConvCase& g = c.geometry;
  g.dtype = in.PickValueInArray(kDTypes);
  g.format = in.ConsumeBool() ? DataFormat::kNCHW : DataFormat::kNHWC;
  g.padding = in.PickValueInArray(kPaddings);
  g.depthwise = c.op == OpKind::kDepthwiseConv2dNative ||
                c.op == OpKind::kDepthwiseConv2dNativeBackpropInput ||
                c.op == OpKind::kDepthwiseConv2dNativeBackpropFilter;
  const bool forward = is_forward(c.op);
  // Empty operands now and then (a zero batch, height, width or channel count).
  const std::uint8_t empty = in.ConsumeIntegral<std::uint8_t>();
  g.n = empty == 1 ? 0 : 1 + in.ConsumeIntegralInRange(0, 1);
  g.h = empty == 2 ? 0 : in.ConsumeIntegralInRange(1, 9);
  g.w = empty == 3 ? 0 : in.ConsumeIntegralInRange(1, 11);
  g.kh = in.ConsumeIntegralInRange(1, 4);
  g.kw = in.ConsumeIntegralInRange(1, 4);
  g.stride_h = stride_from(in);
  g.stride_w = g.depthwise ? g.stride_h : stride_from(in);
  g.dilation_h = in.ConsumeIntegralInRange(1, 3);
  g.dilation_w = in.ConsumeIntegralInRange(1, 3);
  if (g.padding == Padding::kExplicit) {
    g.pad_top = in.ConsumeIntegralInRange(0, 3);
    g.pad_bottom = in.ConsumeIntegralInRange(0, 3);
    g.pad_left = in.ConsumeIntegralInRange(0, 3);
    g.pad_right = in.ConsumeIntegralInRange(0, 3);
  }
  if (g.depthwise) {
    // Forward ops refuse a filter without elements: channels and multiplier stay positive.
    g.c = empty == 4 && !forward ? 0 : in.ConsumeIntegralInRange(1, 5);
    g.filter_in = 1;
    g.filter_out = empty == 5 && !forward ? 0 : in.ConsumeIntegralInRange(1, 3);
  } else {
    const std::int64_t groups = in.ConsumeIntegralInRange(1, 3);
    g.filter_in = in.ConsumeIntegralInRange(1, 4);
    g.c = empty == 4 ? 0 : groups * g.filter_in;
    const std::int64_t per_group = empty == 5 && !forward ? 0 : in.ConsumeIntegralInRange(1, 4);
    g.filter_out = groups * per_group;
    // Conv2DBackpropInput may give input_sizes as the two spatial sizes; the depth then comes
    // from the filter, so that form is ungrouped.
    g.spatial_input_sizes = c.op == OpKind::kConv2DBackpropInput && in.ConsumeBool();
    if (g.spatial_input_sizes) {
      g.c = g.filter_in;
      g.filter_out = per_group;
    }
  }
  // TensorFlow refuses a window larger than the padded input: grow the input to fit.
  if (g.out_h() < 0) g.h = (g.kh - 1) * g.dilation_h + 1 - g.pad_top - g.pad_bottom;
  if (g.out_w() < 0) g.w = (g.kw - 1) * g.dilation_w + 1 - g.pad_left - g.pad_right;

  c.backend = in.ConsumeIntegralInRange(0, 7) == 0 ? "interpreter" : "x86";
  c.threads = in.ConsumeBool() ? 2 : 1;
  c.seed = in.ConsumeIntegral<std::uint64_t>();
  const int specials = in.ConsumeIntegralInRange(0, 7);
  for (int i = 0; i < specials && i < 3; ++i) {
    Special s;
    s.operand = in.ConsumeIntegralInRange(0, 1);
    s.position = in.ConsumeIntegral<std::uint32_t>();
    const double kinds[] = {std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity()};
    s.value = in.PickValueInArray(kinds);
    c.specials.push_back(s);
  }
  return c;
}

// Values the reference and every dtype agree on: multiples of 2^-7 in [-1, 1] for the half
// types (their products and short sums are exact in float), any value for float and double.
void fill(GuardedTensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::uniform_int_distribution<int> grid(-128, 128);
  const bool half = t.dtype() == DType::kHalf || t.dtype() == DType::kBFloat16;
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    t.set(i, half ? grid(rng) / 128.0 : uniform(rng));
  }
}

enum class Kind { kNaN, kPosInf, kNegInf, kFinite };

Kind kind_of(double v) {
  if (std::isnan(v)) return Kind::kNaN;
  if (std::isinf(v)) return v > 0 ? Kind::kPosInf : Kind::kNegInf;
  return Kind::kFinite;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNaN:
      return "NaN";
    case Kind::kPosInf:
      return "+Inf";
    case Kind::kNegInf:
      return "-Inf";
    case Kind::kFinite:
      return "finite";
  }
  return "?";
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return 0x1p-11;
    case DType::kBFloat16:
      return 0x1p-8;
    case DType::kFloat32:
      return 0x1p-24;
    case DType::kFloat64:
      return 0x1p-53;
  }
  return 0x1p-24;
}

[[noreturn]] void fail(const Case& c, const OpDescriptor& desc, const std::string& what) {
  std::fprintf(stderr,
               "\nfuzz_kernels: %s\n  descriptor: %s\n  backend: %s, threads: %d, seed: %llu, "
               "specials:",
               what.c_str(), to_text(desc).c_str(), c.backend.c_str(), c.threads,
               static_cast<unsigned long long>(c.seed));
  for (const Special& s : c.specials) {
    std::fprintf(stderr, " %s@operand%d[%u]", kind_name(kind_of(s.value)), s.operand, s.position);
  }
  std::fprintf(stderr, "%s\n", c.specials.empty() ? " none" : "");
  std::abort();
}

void report_at_exit() {
  if (g_tolerated_nan.load() == 0) return;
  std::fprintf(stderr,
               "fuzz_kernels: %llu of %llu runs gave NaN where the reference did not, in input "
               "gradients with Inf or NaN in an operand (tolerated: CONVJIT_FUZZ_STRICT_NAN=0)\n",
               static_cast<unsigned long long>(g_tolerated_nan.load()),
               static_cast<unsigned long long>(g_runs.load()));
}

void run_case(const Case& c) {
  const OpDescriptor desc = c.geometry.descriptor(c.op);
  CompileOptions options;
  options.backend = c.backend;
  options.num_threads = c.threads;
  Kernel kernel;
  try {
    kernel = compile(desc, options);
  } catch (const Error& e) {
    fail(c, desc, std::string("a valid descriptor was refused: ") + e.what());
  }
  const DType dtype = c.geometry.dtype;
  std::vector<std::unique_ptr<GuardedTensor>> operands;
  for (int i = 0; i < 3; ++i) {
    operands.push_back(std::make_unique<GuardedTensor>(dtype, kernel.operand_shape(i)));
  }
  GuardedTensor &a = *operands[0], &b = *operands[1], &out = *operands[2];
  std::mt19937_64 rng(c.seed);
  fill(a, rng);
  fill(b, rng);
  bool special_input = false;
  for (const Special& s : c.specials) {
    GuardedTensor& t = s.operand == 0 ? a : b;
    if (t.elements() == 0) continue;
    t.set(s.position % t.elements(), s.value);
    special_input = true;
  }
  // An element the kernel forgets to write keeps this value, which no result can have.
  for (std::int64_t i = 0; i < out.elements(); ++i) out.set(i, 777.0);

  try {
    kernel.run(a.view(), b.view(), out.view());
  } catch (const Error& e) {
    fail(c, desc, std::string("run failed: ") + e.what());
  }
  std::vector<double> want_storage(static_cast<std::size_t>(out.elements()) + 1);
  const TensorView want_view{dtype, out.shape(), want_storage.data()};
  run_reference(desc, a.view(), b.view(), want_view);
  ++g_runs;

  const double length =
      static_cast<double>(std::max<std::int64_t>(c.geometry.reduction_length(c.op), 1));
  const double acc = dtype == DType::kFloat64 ? 0x1p-53 : 0x1p-24;
  const double tol_abs = 4.0 * acc * length * std::max(1.0, std::sqrt(length)) + 2.0 * acc;
  const double tol_rel = 2.0 * unit_roundoff(dtype);
  bool tolerated = false;
  for (std::int64_t i = 0; i < out.elements(); ++i) {
    const double got = out.get(i);
    const double want = load_element(dtype, want_storage.data(), i);
    const Kind got_kind = kind_of(got), want_kind = kind_of(want);
    if (got_kind != want_kind) {
      if (!strict_nan() && special_input && is_input_gradient(c.op) && got_kind == Kind::kNaN) {
        tolerated = true;
        continue;
      }
      char line[256];
      std::snprintf(line, sizeof line,
                    "element %lld of %lld: got %s (%g), the reference has %s (%g)",
                    static_cast<long long>(i), static_cast<long long>(out.elements()),
                    kind_name(got_kind), got, kind_name(want_kind), want);
      fail(c, desc, line);
    }
    if (want_kind == Kind::kFinite && std::fabs(got - want) > tol_abs + tol_rel * std::fabs(want)) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "element %lld of %lld: got %.9g, the reference has %.9g (tolerance %.3g)",
                    static_cast<long long>(i), static_cast<long long>(out.elements()), got, want,
                    tol_abs + tol_rel * std::fabs(want));
      fail(c, desc, line);
    }
  }
  if (tolerated) ++g_tolerated_nan;
}

}  // namespace
}  // namespace convjit::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Kernels are compiled fresh from memory, never taken from (or left in) a disk cache.
  ::setenv("CONVJIT_CACHE_DIR", "off", 1);
  std::atexit(&convjit::fuzz::report_at_exit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  convjit::fuzz::run_case(convjit::fuzz::generate(in));
  return 0;
}
