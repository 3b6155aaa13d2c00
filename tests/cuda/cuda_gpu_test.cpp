// The CUDA backend on a real GPU (device "cuda:0"). Every test skips with the reason when no
// GPU is usable ("no CUDA device: ..."); .ci/gpu-check runs them on a machine with one:
//   the sweep and the TensorFlow conformance cases against the reference; the FFMA-family
//   kernels bit for bit against the interpret mode; the warp-level test kernels against the
//   interpreter's model of them; bad input (host pointers, short workspaces, huge buffers) with
//   later calls still working; concurrent compile and run from several threads on several
//   streams.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "convjit/convjit.hpp"
#include "cuda/cuda_test_support.hpp"
#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "reference/naive.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/cuda/cuda_memory.hpp"
#include "support/cuda_source_runner.hpp"
#include "support/cuda_warp_kernels.hpp"
#include "support/run_together.hpp"
#include "support/sweep_cases.hpp"
#include "support/test_conformance.hpp"
#include "support/test_tensors.hpp"

namespace convjit::testing {
namespace {

std::shared_ptr<const codegen::Backend> gpu_backend(std::string* why) {
  runtime::Device device;
  device.kind = runtime::Device::Kind::kCuda;
  Expected<std::shared_ptr<const codegen::Backend>> backend =
      runtime::get_backend(device, "cuda", cpu::Isa::kGeneric);
  if (!backend) {
    *why = backend.status().message();
    return nullptr;
  }
  return *backend;
}

#define REQUIRE_GPU()                                                    \
  std::string why;                                                       \
  const std::shared_ptr<const codegen::Backend> gpu = gpu_backend(&why); \
  if (gpu == nullptr) GTEST_SKIP() << why

std::size_t bytes_of_tensor(const TestTensor& t) {
  return static_cast<std::size_t>(t.elements()) * static_cast<std::size_t>(dtype_size(t.dtype()));
}

/// Runs `kernel` on device copies of a and b; the result lands in *out.
void run_on_device(const Kernel& kernel, const TestTensor& a, const TestTensor& b, TestTensor* out,
                   void* stream = nullptr) {
  DeviceBuffer da(kernel.device(), bytes_of_tensor(a)), db(kernel.device(), bytes_of_tensor(b));
  DeviceBuffer dout(kernel.device(), bytes_of_tensor(*out));
  da.copy_from_host(a.data(), bytes_of_tensor(a));
  db.copy_from_host(b.data(), bytes_of_tensor(b));
  RunContext context;
  context.stream = stream;
  kernel.run(TensorView{a.dtype(), a.shape(), da.data()},
             TensorView{b.dtype(), b.shape(), db.data()},
             TensorView{out->dtype(), out->shape(), dout.data()}, context);
  synchronize(kernel.device(), stream);
  dout.copy_to_host(out->data(), bytes_of_tensor(*out));
}

TEST(CudaGpu, SweepMatchesReference) {
  REQUIRE_GPU();
  std::vector<std::string> failures;
  std::uint64_t seed = 700;
  const std::vector<SweepCase> cases = sweep_cases();
  for (const SweepCase& s : cases) {
    const ConvCase& c = s.geometry;
    const OpDescriptor desc = c.descriptor(s.op);
    const auto shapes = c.operand_shapes(s.op);
    const TestTensor a = random_tensor(c.dtype, shapes[0], seed += 7);
    const TestTensor b = random_tensor(c.dtype, shapes[1], seed + 1);
    TestTensor got(c.dtype, shapes[2]), want(c.dtype, shapes[2]);
    got.fill(std::numeric_limits<double>::quiet_NaN());
    try {
      CompileOptions options;
      options.device = "cuda";
      const Kernel kernel = compile(desc, options);
      run_on_device(kernel, a, b, &got);
    } catch (const Error& e) {
      failures.push_back(fmt::format("{}: {}", to_text(desc), e.what()));
      continue;
    }
    run_reference(desc, a.view(), b.view(), want.view());
    const auto close =
        all_close(got.view(), want.view(), tolerance(c.dtype, c.reduction_length(s.op)));
    if (!close) failures.push_back(fmt::format("{}: {}", to_text(desc), close.message()));
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 10); ++i)
    ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << cases.size() << " failed";
}

// The same plan on the GPU and in the interpret mode gives the same bits where the kernel is
// deterministic arithmetic in the same order (FFMA, direct and depthwise kernels; tensor-core
// accumulation order is the hardware's, so mma kernels are compared with a tolerance above).
TEST(CudaGpu, FfmaKernelsMatchTheInterpreterBitForBit) {
  REQUIRE_GPU();
  const std::shared_ptr<const codegen::Backend> interpreter = cuda_interpret_backend();
  ASSERT_NE(interpreter, nullptr);
  int compared = 0;
  std::vector<std::string> failures;
  for (const SweepCase& s : sweep_cases()) {
    if (s.empty) continue;
    Expected<ConvProblem> p = validate(s.geometry.descriptor(s.op));
    ASSERT_TRUE(p.has_value());
    const bool wgrad = p->direction == ConvDirection::kBackpropFilter;
    std::vector<std::string> plans = {
        "algo=direct,threads=128",
        std::string("algo=igemm,tile=32x16x8,micro=2x1") + (wgrad ? ",splitk=2" : "")};
    if (p->filter_in == 1 && p->direction != ConvDirection::kForward) {
      plans.push_back(wgrad ? "algo=dw,cblock=8,pblock=8,mblock=2,splitk=1"
                            : "algo=dw,cblock=8,pblock=8");
    }
    for (const std::string& forced : plans) {
      codegen::PlanOptions options;
      options.forced = forced;
      auto on_gpu = codegen::compile(*gpu, *p, options);
      auto on_host = codegen::compile(*interpreter, *p, options);
      ASSERT_TRUE(on_gpu.has_value()) << on_gpu.status().to_string();
      ASSERT_TRUE(on_host.has_value()) << on_host.status().to_string();
      auto shape_of = [&](TensorRole r) {
        const auto sh = p->shape(r);
        return std::vector<std::int64_t>(sh.begin(), sh.end());
      };
      TestTensor x = random_tensor(p->dtype, shape_of(TensorRole::kX), 1 + compared);
      TestTensor w = random_tensor(p->dtype, shape_of(TensorRole::kW), 2 + compared);
      TestTensor y = random_tensor(p->dtype, shape_of(TensorRole::kY), 3 + compared);
      const TensorRole out = p->output_role();
      TestTensor& host_out = out == TensorRole::kX ? x : out == TensorRole::kW ? w : y;
      DeviceBuffer dx("cuda:0", bytes_of_tensor(x)), dw("cuda:0", bytes_of_tensor(w)),
          dy("cuda:0", bytes_of_tensor(y));
      dx.copy_from_host(x.data(), bytes_of_tensor(x));
      dw.copy_from_host(w.data(), bytes_of_tensor(w));
      dy.copy_from_host(y.data(), bytes_of_tensor(y));
      ASSERT_TRUE((*on_gpu)->run({dx.data(), dw.data(), dy.data()}, {}).is_ok());
      synchronize("cuda:0");
      TestTensor gpu_out = host_out;
      const DeviceBuffer& d_out = out == TensorRole::kX ? dx : out == TensorRole::kW ? dw : dy;
      d_out.copy_to_host(gpu_out.data(), bytes_of_tensor(gpu_out));
      ASSERT_TRUE((*on_host)->run({x.data(), w.data(), y.data()}, {}).is_ok());
      ++compared;
      if (std::memcmp(gpu_out.data(), host_out.data(), bytes_of_tensor(host_out)) != 0) {
        failures.push_back(fmt::format("{} [{}] {}: GPU and interpreter bits differ", to_text(*p),
                                       forced, (*on_gpu)->name()));
      }
    }
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 10); ++i)
    ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << compared << " differ";
}

TEST(CudaGpu, ConformanceCasesMatchTensorFlow) {
  REQUIRE_GPU();
  for (const ConformanceCase& c : load_conformance_cases(conformance_path())) {
    if (c.expect_error) continue;  // validation is the same on every device
    CompileOptions options;
    options.device = "cuda";
    const Kernel kernel = compile(c.desc, options);
    CaseOperands in = make_operands(c, kernel.operand_shape(0), kernel.operand_shape(1));
    TestTensor got(c.desc.dtype, kernel.operand_shape(2)),
        ref(c.desc.dtype, kernel.operand_shape(2));
    got.fill(std::numeric_limits<double>::quiet_NaN());
    run_on_device(kernel, in.a, in.b, &got);
    if (c.expected) {
      TestTensor want(DType::kFloat64, kernel.operand_shape(2));
      for (std::int64_t i = 0; i < want.elements(); ++i)
        want.set(i, (*c.expected)[static_cast<std::size_t>(i)]);
      EXPECT_TRUE(all_close(got.view(), want.view(), expected_tolerance(c.desc.dtype)))
          << c.test_name;
    } else {
      run_reference(c.desc, in.a.view(), in.b.view(), ref.view());
      Expected<ConvProblem> p = validate(c.desc);
      EXPECT_TRUE(all_close(got.view(), ref.view(), tolerance(c.desc.dtype, reduction_length(*p))))
          << c.test_name;
    }
  }
}

// The warp-level test kernels on the hardware and in the interpreter, from the same inputs.
TEST(CudaGpu, WarpOperationKernelsMatchTheInterpreter) {
  REQUIRE_GPU();
  struct Case {
    const char* kernel;
    const char* body;
    std::uint32_t threads;
    std::size_t x_words, w_words, y_words;
    bool exact;
    std::size_t skip_every, skip_offset;  // y words not defined on a GPU (cp.async before wait)
  };
  const Case cases[] = {
      {"mma16", kMmaKernels, 32, 128, 192, 384, false, 0, 0},
      {"mma_f64", kMmaKernels, 32, 64, 64, 128, false, 0, 0},
      {"ldmatrix_all", kLdmatrixKernel, 32, 0, 0, 768, true, 0, 0},
      {"cp_async_groups", kCpAsyncKernel, 32, 64, 64, 256, true, 8, 0},
      {"shuffles", kShuffleKernel, 64, 0, 0, 256, true, 0, 0},
  };
  std::mt19937 rng(17);
  for (const Case& c : cases) {
    RawBuffers host;
    std::vector<std::uint32_t> x(c.x_words), w(c.w_words);
    // Small 16-bit values in both halves: finite whether read as f16, bf16 or tf32.
    std::uniform_int_distribution<int> small(-64, 64);
    auto half_bits = [&] { return static_cast<std::uint32_t>(0x3c00 + small(rng)) & 0xffffu; };
    for (auto& v : x) v = half_bits() | (half_bits() << 16);
    for (auto& v : w) v = half_bits() | (half_bits() << 16);
    if (std::string(c.kernel) == "mma_f64" || std::string(c.kernel) == "cp_async_groups") {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float f = 0.25f * static_cast<float>(small(rng));
        std::memcpy(&x[i], &f, 4);
      }
    }
    host.x = bytes_of(x);
    host.w = bytes_of(w);
    host.y.assign(c.y_words * 4, 0);
    RawBuffers device = host;
    const std::vector<RawLaunch> launch = {{c.kernel, {1, 1, 1}, {c.threads, 1, 1}}};
    ASSERT_TRUE(run_cuda_source(c.kernel, c.body, launch, &host).is_ok()) << c.kernel;
    const Status s = run_cuda_source_on_gpu(c.kernel, c.body, launch, &device);
    ASSERT_TRUE(s.is_ok()) << c.kernel << ": " << s.to_string();
    const std::vector<float> h = values_of<float>(host.y), d = values_of<float>(device.y);
    const std::vector<std::uint32_t> hb = values_of<std::uint32_t>(host.y),
                                     db = values_of<std::uint32_t>(device.y);
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (c.skip_every > 0 && i % c.skip_every == c.skip_offset) continue;
      if (c.exact) {
        EXPECT_EQ(hb[i], db[i]) << c.kernel << " word " << i;
      } else {
        EXPECT_NEAR(h[i], d[i], 1e-5 * std::max(1.0f, std::fabs(h[i])))
            << c.kernel << " word " << i;
      }
    }
  }
}

TEST(CudaGpu, BadInputIsRefusedAndLaterCallsWork) {
  REQUIRE_GPU();
  OpDescriptor d;
  d.op = OpKind::kConv2DBackpropFilter;
  d.input = {4, 32, 32, 8};
  d.filter = {3, 3, 8, 8};
  d.out_backprop = {4, 32, 32, 8};
  d.padding = Padding::kSame;
  CompileOptions options;
  options.device = "cuda";
  const Kernel kernel = compile(d, options);
  const TestTensor a = random_tensor(d.dtype, kernel.operand_shape(0), 1);
  const TestTensor b = random_tensor(d.dtype, kernel.operand_shape(1), 2);
  TestTensor out(d.dtype, kernel.operand_shape(2)), want(d.dtype, kernel.operand_shape(2));
  run_reference(d, a.view(), b.view(), want.view());
  // Host pointers.
  try {
    kernel.run(a.view(), b.view(), out.view());
    ADD_FAILURE() << "host pointers accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not CUDA device memory"), std::string::npos) << e.what();
  }
  // A workspace that is too small.
  if (kernel.workspace_bytes() > 0) {
    DeviceBuffer small("cuda", kernel.workspace_bytes() - 1);
    RunContext context;
    context.workspace = small.data();
    context.workspace_bytes = small.bytes();
    DeviceBuffer da("cuda", a.elements() * 4), db("cuda", b.elements() * 4),
        dout("cuda", out.elements() * 4);
    try {
      kernel.run(TensorView{d.dtype, a.shape(), da.data()},
                 TensorView{d.dtype, b.shape(), db.data()},
                 TensorView{d.dtype, out.shape(), dout.data()}, context);
      ADD_FAILURE() << "a short workspace accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("smaller than the"), std::string::npos) << e.what();
    }
  }
  // More device memory than exists.
  try {
    DeviceBuffer huge("cuda", std::size_t{1} << 50);
    ADD_FAILURE() << "a petabyte allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResourceExhausted) << e.what();
  }
  // And the kernel still computes the right thing.
  out.fill(std::numeric_limits<double>::quiet_NaN());
  run_on_device(kernel, a, b, &out);
  EXPECT_TRUE(all_close(out.view(), want.view(), tolerance(d.dtype, 4 * 32 * 32)));
}

TEST(CudaGpu, ConcurrentCompileAndRunOnSeveralStreams) {
  REQUIRE_GPU();
  constexpr int kThreads = 4;
  std::vector<std::string> failures(kThreads);
  run_together(kThreads, [&](int t) {
    Expected<void*> stream = t == 0 ? Expected<void*>(static_cast<void*>(nullptr))
                                    : runtime::cuda::create_stream(0, t % 2 == 0);
    if (!stream) {
      failures[static_cast<std::size_t>(t)] = stream.status().message();
      return;
    }
    try {
      for (int i = 0; i < 6; ++i) {
        OpDescriptor d;
        d.op = i % 2 == 0 ? OpKind::kConv2DBackpropInput : OpKind::kConv2DBackpropFilter;
        d.dtype = i % 3 == 0 ? DType::kHalf : DType::kFloat32;
        d.input = {2, 9 + i % 3, 9, 8};
        d.filter = {3, 3, 8, 4 + 4 * (t % 2)};
        d.out_backprop = {2, 9 + i % 3, 9, 4 + 4 * (t % 2)};
        d.padding = Padding::kSame;
        CompileOptions options;
        options.device = "cuda";
        const Kernel kernel = compile(d, options);
        const TestTensor a = random_tensor(d.dtype, kernel.operand_shape(0), 10 * t + i);
        const TestTensor b = random_tensor(d.dtype, kernel.operand_shape(1), 10 * t + i + 1);
        TestTensor got(d.dtype, kernel.operand_shape(2)), want(d.dtype, kernel.operand_shape(2));
        run_on_device(kernel, a, b, &got, *stream);
        run_reference(d, a.view(), b.view(), want.view());
        Expected<ConvProblem> p = validate(d);
        if (!all_close(got.view(), want.view(), tolerance(d.dtype, reduction_length(*p)))) {
          failures[static_cast<std::size_t>(t)] = "wrong result for " + to_text(d);
        }
      }
    } catch (const Error& e) {
      failures[static_cast<std::size_t>(t)] = e.what();
    }
    if (*stream != nullptr) (void)runtime::cuda::destroy_stream(0, *stream);
  });
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[static_cast<std::size_t>(t)], "") << "thread " << t;
}

}  // namespace
}  // namespace convjit::testing
