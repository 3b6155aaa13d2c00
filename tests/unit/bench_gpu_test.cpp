// The GPU benchmark's pieces that need no GPU: the peak table, the tensors cuDNN is given (its
// KRSC filter, asymmetric SAME padding as a taller x: checked by computing the gradients the
// way cuDNN defines them on those tensors and comparing with convjit's reference), and the
// clear errors without a driver. The timed path itself needs a GPU (`convjit bench --device
// cuda`, docs/GPU.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "tools/bench/bench_shapes.hpp"
#include "tools/bench/bench_tensor.hpp"
#include "tools/bench/gpu/cuda_driver.hpp"
#include "tools/bench/gpu/cudnn_conv.hpp"
#include "tools/bench/gpu/gpu_layouts.hpp"
#include "tools/bench/gpu/gpu_peak.hpp"

namespace convjit::bench::gpu {
namespace {

TEST(GpuPeak, DataSheetFiguresFromTheTable) {
  // A100 SXM: 108 SMs at 1410 MHz: 312 TFLOP/s bf16, 156 tf32, 19.5 f32, 19.5 f64 (DMMA).
  EXPECT_NEAR(peak_tflops(8, 0, 108, 1410, PeakMath::kBF16), 311.9, 0.1);
  EXPECT_NEAR(peak_tflops(8, 0, 108, 1410, PeakMath::kTf32), 155.9, 0.1);
  EXPECT_NEAR(peak_tflops(8, 0, 108, 1410, PeakMath::kF32), 19.5, 0.1);
  EXPECT_NEAR(peak_tflops(8, 0, 108, 1410, PeakMath::kF64), 19.5, 0.1);
  // H100 SXM: 132 SMs at 1830 MHz: 989 TFLOP/s f16.
  EXPECT_NEAR(peak_tflops(9, 0, 132, 1830, PeakMath::kF16), 989.4, 0.5);
  // Turing has no bf16 or tf32 tensor cores; an unknown SM has no peak.
  EXPECT_EQ(flops_per_clock_per_sm(7, 5, PeakMath::kBF16), 0);
  EXPECT_EQ(flops_per_clock_per_sm(7, 5, PeakMath::kTf32), 0);
  EXPECT_GT(flops_per_clock_per_sm(7, 5, PeakMath::kF16), 0);
  EXPECT_EQ(peak_tflops(6, 1, 30, 1500, PeakMath::kF32), 0);
  EXPECT_NE(describe_peak_table(6, 1).find("not in the peak table"), std::string::npos);
  EXPECT_NE(describe_peak_table(9, 0).find("H100"), std::string::npos);
}

BenchShape shape(bool depthwise, std::int64_t h, std::int64_t w, std::int64_t ic, std::int64_t m,
                 std::int64_t k, std::int64_t stride, bool same, std::int64_t dilation = 1) {
  BenchShape s;
  s.name = "t";
  s.depthwise = depthwise;
  s.n = 2;
  s.h = h;
  s.w = w;
  s.ic = ic;
  s.m = m;
  s.kh = k;
  s.kw = k;
  s.stride = stride;
  s.dilation = dilation;
  s.same_padding = same;
  return s;
}

// cuDNN's definition of the convolution on its tensors (NHWC x, KRSC filter, symmetric
// padding, groups), as the adjoint pairs it computes: dx += dy * f and df += dy * x over every
// (output position, tap) whose input position lies inside x.
void cudnn_semantics(const CudnnProblem& p, std::vector<double>& x, std::vector<double>& f,
                     const std::vector<double>& dy) {
  const int cpg = p.c / p.groups, kpg = p.k / p.groups;
  for (int n = 0; n < p.n; ++n)
    for (int oh = 0; oh < p.out_h; ++oh)
      for (int ow = 0; ow < p.out_w; ++ow)
        for (int k = 0; k < p.k; ++k)
          for (int r = 0; r < p.r; ++r)
            for (int s = 0; s < p.s; ++s) {
              const int ih = oh * p.stride - p.pad_h + r * p.dilation;
              const int iw = ow * p.stride - p.pad_w + s * p.dilation;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              for (int cg = 0; cg < cpg; ++cg) {
                const int c = k / kpg * cpg + cg;
                const std::size_t xi =
                    ((static_cast<std::size_t>(n) * p.h + ih) * p.w + iw) * p.c + c;
                const std::size_t fi =
                    ((static_cast<std::size_t>(k) * p.r + r) * p.s + s) * cpg + cg;
                const double g =
                    dy[((static_cast<std::size_t>(n) * p.out_h + oh) * p.out_w + ow) * p.k + k];
                if (p.backprop_data) {
                  x[xi] += g * f[fi];
                } else {
                  f[fi] += g * x[xi];
                }
              }
            }
}

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The gradient cuDNN computes on the tensors the benchmark gives it, brought back to
// TensorFlow's layout, equals convjit's reference on TensorFlow's tensors.
void check_cudnn_view(const BenchShape& s, BenchOp op) {
  SCOPED_TRACE(fmt::format("{} {}x{} s{} d{} {} {}", s.depthwise ? "dw" : "conv", s.h, s.w,
                           s.stride, s.dilation, s.same_padding ? "SAME" : "VALID",
                           op == BenchOp::kBackpropData ? "dgrad" : "wgrad"));
  const bool data_grad = op == BenchOp::kBackpropData;
  std::mt19937 rng(7);
  BenchTensor x(DType::kFloat32, {s.n, s.h, s.w, s.ic});
  BenchTensor w(DType::kFloat32, {s.kh, s.kw, s.ic, s.m});
  BenchTensor y(DType::kFloat32, {s.n, s.out_h(), s.out_w(), s.oc()});
  (data_grad ? w : x).fill_random(rng);
  y.fill_random(rng);
  BenchTensor want(DType::kFloat32, (data_grad ? x : w).shape());
  run_reference(make_descriptor(s, op, DType::kFloat32), data_grad ? w.view() : x.view(), y.view(),
                want.view());

  const CudnnProblem p = cudnn_problem(s, data_grad);
  ASSERT_EQ(p.h, s.h + extra_rows(s));
  const auto floats = [](const std::vector<std::byte>& b) {
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  std::vector<double> cx(static_cast<std::size_t>(p.n) * p.h * p.w * p.c, 0.0);
  std::vector<double> cf(static_cast<std::size_t>(s.kh * s.kw * s.ic * s.m), 0.0);
  const float* yp = static_cast<const float*>(y.data());
  const std::vector<double> dy(yp, yp + y.elements());
  if (data_grad) {
    cf = as_doubles(floats(hwio_to_krsc(s, w.data(), 4)));
  } else {
    cx = as_doubles(floats(pad_x(s, x.data(), 4)));
  }
  cudnn_semantics(p, cx, cf, dy);

  BenchTensor got(DType::kFloat32, want.shape());
  if (data_grad) {
    std::vector<float> padded(cx.begin(), cx.end());
    crop_x(s, padded.data(), got.data(), 4);
  } else {
    std::vector<float> krsc(cf.begin(), cf.end());
    krsc_to_hwio(s, krsc.data(), got.data(), 4);
  }
  EXPECT_LT(relative_error(got, want), 1e-5);
}

TEST(GpuLayouts, CudnnSeesTensorflowsProblem) {
  const std::vector<BenchShape> shapes = {
      shape(false, 8, 8, 3, 5, 3, 2, true),     // even H, stride 2 SAME: pad 0 top, 1 bottom
      shape(false, 7, 6, 4, 3, 3, 1, true, 2),  // dilation 2
      shape(false, 9, 9, 2, 4, 3, 2, false),    // VALID, the last row unused
      shape(false, 10, 7, 3, 2, 4, 3, true),    // even kernel, stride 3: asymmetric
      shape(true, 8, 9, 3, 2, 3, 2, true),      // depthwise, multiplier 2
      shape(true, 6, 6, 4, 1, 5, 1, true),      // depthwise 5x5
  };
  for (const BenchShape& s : shapes) {
    check_cudnn_view(s, BenchOp::kBackpropData);
    check_cudnn_view(s, BenchOp::kBackpropFilter);
  }
}

TEST(GpuLayouts, FilterRoundTripAndPadding) {
  const BenchShape s = shape(false, 8, 8, 3, 5, 3, 2, true);
  EXPECT_EQ(extra_rows(s), 1);
  EXPECT_EQ(extra_cols(s), 1);
  EXPECT_EQ(extra_rows(shape(false, 9, 9, 3, 5, 3, 2, true)), 0);  // odd H: symmetric
  std::vector<std::uint16_t> hwio(3 * 3 * 3 * 5);
  for (std::size_t i = 0; i < hwio.size(); ++i) hwio[i] = static_cast<std::uint16_t>(i);
  const std::vector<std::byte> krsc = hwio_to_krsc(s, hwio.data(), 2);
  // KRSC element (k=4, r=2, s=1, c=2) is HWIO element (2, 1, 2, 4).
  std::uint16_t v = 0;
  std::memcpy(&v, krsc.data() + (((4 * 3 + 2) * 3 + 1) * 3 + 2) * 2, 2);
  EXPECT_EQ(v, ((2 * 3 + 1) * 3 + 2) * 5 + 4);
  std::vector<std::uint16_t> back(hwio.size());
  krsc_to_hwio(s, krsc.data(), back.data(), 2);
  EXPECT_EQ(back, hwio);
}

TEST(GpuBench, NoDriverIsAClearError) {
  try {
    CudaDriver driver(0);
    GTEST_SKIP() << "a CUDA device is present: the no-device error is not reachable";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(GpuBench, CudnnIsOpenedAtRunTimeAndItsSymbolsResolve) {
  // Without a GPU cuDNN loads (when installed) but cannot create a handle: the error says so,
  // and no symbol the benchmark uses is missing from the library.
  try {
    Cudnn cudnn(nullptr);
    GTEST_SKIP() << "cuDNN created a handle (a GPU is present): " << cudnn.name();
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("has no"), std::string::npos) << what;
    EXPECT_TRUE(what.find("cudnnCreate failed") != std::string::npos ||
                what.find("cuDNN not found") != std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace convjit::bench::gpu
