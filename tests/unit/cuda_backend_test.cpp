// The CUDA backend through the public APIs on a machine without a GPU: a clear "no CUDA device"
// error (never a crash), the interpret mode's device and workspace handling, the plan model's
// choices and its forced-plan errors, and stored code reloaded without compiling again.
#ifdef CONVJIT_HAVE_CUDA

#include "codegen/cuda/cuda_backend.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_plan.hpp"
#include "convjit/convjit.h"
#include "convjit/convjit.hpp"
#include "frontend/validate.hpp"
#include "runtime/backend_registry.hpp"
#include "support/test_tensors.hpp"

namespace convjit::testing {
namespace {

OpDescriptor filter_gradient(std::int64_t batch = 4, std::int64_t size = 32) {
  OpDescriptor d;
  d.op = OpKind::kConv2DBackpropFilter;
  d.dtype = DType::kFloat32;
  d.input = {batch, size, size, 8};
  d.filter = {3, 3, 8, 8};
  d.out_backprop = {batch, size, size, 8};
  d.strides = {1, 1, 1, 1};
  d.padding = Padding::kSame;
  return d;
}

ConvProblem problem_of(const OpDescriptor& d) {
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  return p.has_value() ? *p : ConvProblem{};
}

/// Whether a GPU is usable here, and why not.
bool gpu_available(std::string* why) {
  runtime::Device device;
  device.kind = runtime::Device::Kind::kCuda;
  Expected<std::shared_ptr<const codegen::Backend>> backend =
      runtime::get_backend(device, "", cpu::Isa::kGeneric);
  if (!backend) *why = backend.status().message();
  return backend.has_value();
}

TEST(CudaBackend, CompileForCudaWithoutGpuIsAClearError) {
  std::string why;
  if (gpu_available(&why)) GTEST_SKIP() << "a CUDA device is present: this checks its absence";
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    CompileOptions options;
    options.device = device;
    try {
      (void)compile(filter_gradient(), options);
      ADD_FAILURE() << "compile for " << device << " succeeded without a GPU";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnavailable) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("no CUDA device: ", 0), 0u) << e.what();
    }
  }
  // The C API: a status and the same message, no crash.
  const std::int64_t input[] = {1, 5, 5, 2}, filter[] = {3, 3, 2, 2}, dy[] = {1, 5, 5, 2};
  const std::int64_t strides[] = {1, 1, 1, 1};
  convjit_op_desc desc{};
  desc.op = "Conv2DBackpropFilter";
  desc.dtype = CONVJIT_FLOAT32;
  desc.padding = "SAME";
  desc.input = input;
  desc.input_len = 4;
  desc.filter = filter;
  desc.filter_len = 4;
  desc.out_backprop = dy;
  desc.out_backprop_len = 4;
  desc.strides = strides;
  desc.strides_len = 4;
  convjit_compile_options options{};
  options.device = "cuda";
  convjit_kernel* kernel = nullptr;
  EXPECT_EQ(convjit_compile_with_options(&desc, &options, &kernel), CONVJIT_UNAVAILABLE);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_NE(std::string(convjit_last_error()).find("no CUDA device"), std::string::npos)
      << convjit_last_error();
}

TEST(CudaBackend, GpuRunMatchesReference) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  // With a GPU, .ci/gpu-check runs the whole sweep on it; here one kernel on device memory.
  const OpDescriptor d = filter_gradient(2, 9);
  CompileOptions options;
  options.device = "cuda";
  const Kernel kernel = compile(d, options);
  const TestTensor a = random_tensor(d.dtype, kernel.operand_shape(0), 1);
  const TestTensor b = random_tensor(d.dtype, kernel.operand_shape(1), 2);
  TestTensor got(d.dtype, kernel.operand_shape(2)), want(d.dtype, kernel.operand_shape(2));
  auto bytes = [](const TestTensor& t) { return static_cast<std::size_t>(t.elements()) * 4; };
  DeviceBuffer da("cuda", bytes(a)), db("cuda", bytes(b)), dout("cuda", bytes(got));
  da.copy_from_host(a.data(), bytes(a));
  db.copy_from_host(b.data(), bytes(b));
  kernel.run(TensorView{d.dtype, a.shape(), da.data()}, TensorView{d.dtype, b.shape(), db.data()},
             TensorView{d.dtype, got.shape(), dout.data()});
  dout.copy_to_host(got.data(), bytes(got));
  run_reference(d, a.view(), b.view(), want.view());
  EXPECT_TRUE(all_close(got.view(), want.view(), tolerance(d.dtype, 2 * 9 * 9)));
  // A host pointer is refused with a clear error, and the kernel still works afterwards.
  try {
    kernel.run(a.view(), b.view(), got.view());
    ADD_FAILURE() << "a host pointer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not CUDA device memory"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, InterpretDeviceRunsTheCudaBackend) {
  CompileOptions options;
  options.device = "cuda-interpret";
  const OpDescriptor d = filter_gradient(1, 6);
  const Kernel kernel = compile(d, options);
  EXPECT_EQ(kernel.backend(), "cuda");
  EXPECT_EQ(kernel.device(), "cuda-interpret");
  EXPECT_EQ(kernel.name().rfind("cuda_sm80_f32_bwd_filter_nhwc_", 0), 0u) << kernel.name();
  // CONVJIT_CUDA_INTERPRET=1 turns "cuda" into this device.
  Expected<runtime::Device> device = runtime::parse_device("cuda:1", /*cuda_interpret=*/true);
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ(device->kind, runtime::Device::Kind::kCudaInterpret);
}

TEST(CudaBackend, InterpretChecksTheCallersWorkspace) {
  const OpDescriptor d = filter_gradient();
  CompileOptions options;
  options.device = "cuda-interpret";
  const Kernel kernel = compile(d, options);
  ASSERT_GT(kernel.workspace_bytes(), 0u) << kernel.name() << " has no split-K workspace";
  EXPECT_NE(kernel.name().find("_sk"), std::string::npos) << kernel.name();
  const TestTensor a = random_tensor(d.dtype, kernel.operand_shape(0), 3);
  const TestTensor b = random_tensor(d.dtype, kernel.operand_shape(1), 4);
  TestTensor got(d.dtype, kernel.operand_shape(2)), want(d.dtype, kernel.operand_shape(2));
  run_reference(d, a.view(), b.view(), want.view());
  std::vector<std::byte> workspace(kernel.workspace_bytes());
  RunContext context;
  context.workspace = workspace.data();
  context.workspace_bytes = workspace.size() - 1;
  try {
    kernel.run(a.view(), b.view(), got.view(), context);
    ADD_FAILURE() << "a workspace one byte short was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("smaller than the"), std::string::npos) << e.what();
  }
  context.workspace_bytes = workspace.size();
  got.fill(std::numeric_limits<double>::quiet_NaN());
  kernel.run(a.view(), b.view(), got.view(), context);
  const Tolerance tol = tolerance(d.dtype, 4 * 32 * 32);
  EXPECT_TRUE(all_close(got.view(), want.view(), tol));
  got.fill(std::numeric_limits<double>::quiet_NaN());
  kernel.run(a.view(), b.view(), got.view());  // its own workspace
  EXPECT_TRUE(all_close(got.view(), want.view(), tol));
}

TEST(CudaBackend, EmptyProblemRunsTheZeroFillKernel) {
  OpDescriptor d = filter_gradient(0, 5);
  CompileOptions options;
  options.device = "cuda-interpret";
  const Kernel kernel = compile(d, options);
  EXPECT_NE(kernel.name().find("zero_fill"), std::string::npos) << kernel.name();
  TestTensor out(d.dtype, kernel.operand_shape(2));
  out.fill(std::numeric_limits<double>::quiet_NaN());
  const TestTensor a(d.dtype, kernel.operand_shape(0)), b(d.dtype, kernel.operand_shape(1));
  kernel.run(a.view(), b.view(), out.view());
  for (std::int64_t i = 0; i < out.elements(); ++i) ASSERT_EQ(out.get(i), 0.0) << i;
}

codegen::CudaDeviceInfo arch(const char* name) {
  Expected<codegen::CudaDeviceInfo> info = codegen::known_cuda_target(name);
  EXPECT_TRUE(info.has_value());
  return info.has_value() ? *info : codegen::CudaDeviceInfo{};
}

std::string plan_name(const OpDescriptor& d, const char* target, MathMode math = MathMode::kExact,
                      const std::string& forced = "") {
  codegen::PlanOptions options;
  options.math_mode = math;
  options.forced = forced;
  Expected<std::unique_ptr<codegen::CudaPlan>> plan =
      codegen::make_cuda_plan(problem_of(d), arch(target), options);
  return plan ? (*plan)->kernel_name : "error: " + plan.status().message();
}

// Each tensor-core operand's shared tile follows the tensor's memory order, with 16-byte
// copies where a group's channels hold whole runs (8 16-bit, 4 f32, 2 f64 elements).
TEST(CudaPlanModel, OperandTilesFollowTheTensorsMemoryOrder) {
  auto tiles = [](OpDescriptor d, DType dtype, DataFormat format, MathMode math,
                  const std::string& forced = "") {
    d.dtype = dtype;
    if (format == DataFormat::kNCHW) {
      d.data_format = format;
      auto to_nchw = [](std::vector<std::int64_t> s) {
        return s.empty() ? s : std::vector<std::int64_t>{s[0], s[3], s[1], s[2]};
      };
      d.input = to_nchw(d.input);
      d.out_backprop = to_nchw(d.out_backprop);
    }
    const std::string name = plan_name(d, "sm_90", math, forced);
    const std::size_t at = name.rfind("_a");
    return at == std::string::npos ? name : name.substr(at + 2, 5);
  };
  OpDescriptor wgrad = filter_gradient(2, 8);
  wgrad.input = {2, 8, 8, 16};
  wgrad.filter = {3, 3, 16, 24};
  wgrad.out_backprop = {2, 8, 8, 24};
  OpDescriptor dgrad = wgrad;
  dgrad.op = OpKind::kConv2DBackpropInput;
  OpDescriptor fwd = wgrad;
  fwd.op = OpKind::kConv2D;
  fwd.out_backprop.clear();
  const auto nhwc = DataFormat::kNHWC, nchw = DataFormat::kNCHW;
  const auto exact = MathMode::kExact, tf32 = MathMode::kTF32;
  // NHWC: channels along K for the forward x and the input gradient's dy and w; along M and
  // N for the filter gradient's x and dy and the forward w.
  EXPECT_EQ(tiles(fwd, DType::kBFloat16, nhwc, exact), "kvbnv");
  EXPECT_EQ(tiles(dgrad, DType::kBFloat16, nhwc, exact), "kvbkv");
  EXPECT_EQ(tiles(wgrad, DType::kBFloat16, nhwc, exact), "mvbnv");
  // NCHW: x and dy are gathered along their columns; w (HWIO) keeps its runs.
  EXPECT_EQ(tiles(fwd, DType::kHalf, nchw, exact), "mebnv");
  EXPECT_EQ(tiles(dgrad, DType::kHalf, nchw, exact), "mebkv");
  EXPECT_EQ(tiles(wgrad, DType::kHalf, nchw, exact), "kebke");
  // 24 output channels hold runs of 8 16-bit elements; 12 do not (runs of 4 f32 still fit).
  wgrad.filter = {3, 3, 16, 12};
  wgrad.out_backprop = {2, 8, 8, 12};
  EXPECT_EQ(tiles(wgrad, DType::kBFloat16, nhwc, exact), "mvbne");
  EXPECT_EQ(tiles(wgrad, DType::kFloat32, nhwc, tf32), "mvbnv");
  wgrad.filter = {3, 3, 16, 6};
  wgrad.out_backprop = {2, 8, 8, 6};
  EXPECT_EQ(tiles(wgrad, DType::kFloat64, nhwc, exact), "mvbnv");
  EXPECT_EQ(tiles(wgrad, DType::kFloat32, nhwc, tf32), "mvbne");
  // Stages: three for 16-bit operands, two for tf32 and f64, never more than the k tiles.
  fwd.input = {8, 32, 32, 64};
  fwd.filter = {3, 3, 64, 64};
  fwd.dtype = DType::kHalf;
  EXPECT_NE(plan_name(fwd, "sm_90").find("_s3_"), std::string::npos) << plan_name(fwd, "sm_90");
  fwd.dtype = DType::kFloat32;
  EXPECT_NE(plan_name(fwd, "sm_90", tf32).find("_s2_"), std::string::npos)
      << plan_name(fwd, "sm_90", tf32);
  fwd.filter = {1, 1, 64, 64};
  fwd.dtype = DType::kHalf;  // K = 64: two k tiles of 32
  EXPECT_NE(plan_name(fwd, "sm_90").find("_s2_"), std::string::npos) << plan_name(fwd, "sm_90");
}

// The FFMA kernel: two shared stages wherever the reduction has two k slices (one barrier per
// slice, the next slice's loads in flight), one where it has a single slice; slices copied
// k-fastest (NHWC input gradient: dy and w run along k) get rows padded by 4 elements.
TEST(CudaPlanModel, FfmaStagesAndCopyOrderFollowTheReduction) {
  auto plan_of = [](const OpDescriptor& d, const std::string& forced) {
    codegen::PlanOptions options;
    options.forced = forced;
    Expected<std::unique_ptr<codegen::CudaPlan>> plan =
        codegen::make_cuda_plan(problem_of(d), arch("sm_80"), options);
    EXPECT_TRUE(plan.has_value()) << plan.status().to_string();
    return plan ? std::move(*plan) : nullptr;
  };
  OpDescriptor dgrad = filter_gradient(2, 9);
  dgrad.op = OpKind::kConv2DBackpropInput;  // K = 3 * 3 * 8 = 72: nine slices of 8
  auto p = plan_of(dgrad, "algo=igemm,tile=64x8x8,micro=4x1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->stages, 2);
  EXPECT_TRUE(p->operand_a.k_contiguous);
  EXPECT_TRUE(p->operand_b.k_contiguous);
  EXPECT_EQ(p->shared_bytes(), 2 * 8 * ((64 + 4) + (8 + 4)) * 4);
  EXPECT_NE(p->kernel_name.find("_t4x1_s2"), std::string::npos) << p->kernel_name;
  p = plan_of(dgrad, "algo=igemm,tile=64x8x8,micro=4x1,stages=1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->shared_bytes(), 8 * ((64 + 4) + (8 + 4)) * 4);
  EXPECT_EQ(p->kernel_name.find("_s2"), std::string::npos) << p->kernel_name;
  // The filter gradient's NHWC x and dy run along m and n: unpadded rows.
  OpDescriptor wgrad = filter_gradient(1, 8);
  p = plan_of(wgrad, "algo=igemm,tile=64x8x8,micro=4x1");
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->operand_a.k_contiguous);
  EXPECT_EQ(p->shared_bytes(), 2 * 8 * (64 + 8) * 4);
  // Fused residue classes (a strided input gradient): one stage, separate launches two.
  OpDescriptor strided = dgrad;
  strided.strides = {1, 2, 2, 1};
  strided.out_backprop = {2, 5, 5, 8};
  p = plan_of(strided, "algo=igemm");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->fused_residues);
  EXPECT_EQ(p->stages, 1);
  p = plan_of(strided, "algo=igemm,fuse=0");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->stages, 2);
  // One slice of k (a 1x1 filter over 8 channels, K = 8): one stage.
  dgrad.filter = {1, 1, 8, 8};
  dgrad.padding = Padding::kValid;
  dgrad.strides = {1, 1, 1, 1};
  dgrad.out_backprop = {2, 9, 9, 8};
  p = plan_of(dgrad, "algo=igemm");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->stages, 1);
}

TEST(CudaPlanModel, ChoosesAlgorithmFromProblemAndDevice) {
  OpDescriptor d = filter_gradient(1, 8);
  EXPECT_EQ(plan_name(d, "sm_80"), "cuda_sm80_f32_bwd_filter_nhwc_igemm_m128n8k8_t8x1_s2");
  EXPECT_EQ(plan_name(d, "sm_80", MathMode::kTF32),
            "cuda_sm80_f32_tf32_bwd_filter_nhwc_mma_m64n8k16_w4x1_s2_amvbnv");
  d.dtype = DType::kBFloat16;
  // Three stages for 16-bit operands, but no more than the reduction's k tiles (2 here).
  EXPECT_EQ(plan_name(d, "sm_90"), "cuda_sm90_bf16_bwd_filter_nhwc_mma_m64n8k32_w4x1_s2_amvbnv");
  EXPECT_EQ(plan_name(d, "sm_75"), "cuda_sm75_bf16_bwd_filter_nhwc_igemm_m128n8k8_t8x1_s2");
  d.dtype = DType::kFloat64;
  EXPECT_EQ(plan_name(d, "sm_86"), "cuda_sm86_f64_bwd_filter_nhwc_igemm_m128n8k8_t8x1_s2");
  // A big reduction over few output tiles is split.
  EXPECT_NE(plan_name(filter_gradient(), "sm_80").find("_sk8"), std::string::npos)
      << plan_name(filter_gradient(), "sm_80");
  // Depthwise gradients get the depthwise kernels, strided input gradients residue classes.
  OpDescriptor dw;
  dw.op = OpKind::kDepthwiseConv2dNativeBackpropInput;
  dw.dtype = DType::kHalf;
  dw.data_format = DataFormat::kNCHW;
  dw.input = {2, 16, 9, 9};
  dw.filter = {3, 3, 16, 2};
  dw.out_backprop = {2, 32, 5, 5};
  dw.strides = {1, 1, 2, 2};
  dw.padding = Padding::kSame;
  EXPECT_EQ(plan_name(dw, "sm_80"), "cuda_sm80_f16_bwd_data_dw_nchw_dw_c16p16");
  OpDescriptor dgrad = filter_gradient(2, 9);
  dgrad.op = OpKind::kConv2DBackpropInput;
  dgrad.out_backprop = {2, 5, 5, 8};
  dgrad.strides = {1, 2, 2, 1};
  EXPECT_EQ(plan_name(dgrad, "sm_80"), "cuda_sm80_f32_bwd_data_nhwc_igemm_m128n8k8_t8x1_r2x2f");
  // The residue classes in one launch by default, one launch each when forced; fuse applies to
  // strided input gradients only.
  EXPECT_EQ(plan_name(dgrad, "sm_80", MathMode::kExact, "algo=igemm,fuse=0"),
            "cuda_sm80_f32_bwd_data_nhwc_igemm_m128n8k8_t8x1_s2_r2x2");
  EXPECT_NE(plan_name(dgrad, "sm_80", MathMode::kExact, "algo=igemm,fuse=2").find("0 or 1"),
            std::string::npos);
  EXPECT_NE(plan_name(filter_gradient(), "sm_80", MathMode::kExact, "algo=igemm,fuse=1")
                .find("does not apply"),
            std::string::npos);
  // Where the model's kernel does not fit, the direct kernel takes the problem: a depthwise
  // filter tile over the shared memory, more groups than a grid dimension holds.
  dw.dtype = DType::kFloat64;
  dw.filter = {7, 7, 16, 128};
  dw.out_backprop = {2, 16 * 128, 5, 5};
  EXPECT_EQ(plan_name(dw, "sm_80"), "cuda_sm80_f64_bwd_data_dw_nchw_direct_t256");
  EXPECT_NE(plan_name(dw, "sm_80", MathMode::kExact, "algo=dw").find("shared memory"),
            std::string::npos);
  OpDescriptor groups;
  groups.op = OpKind::kConv2DBackpropInput;
  groups.input = {1, 2, 2, 2 * 70000};
  groups.filter = {1, 1, 2, 70000};
  groups.out_backprop = {1, 2, 2, 70000};
  groups.padding = Padding::kValid;
  EXPECT_EQ(plan_name(groups, "sm_80"), "cuda_sm80_f32_bwd_data_nhwc_direct_t256");
}

TEST(CudaPlanModel, ForcedChoicesAreCheckedWithClearErrors) {
  const OpDescriptor d = filter_gradient(1, 8);
  EXPECT_EQ(plan_name(d, "sm_80", MathMode::kExact, "algo=igemm,tile=32x16x4,micro=2x2,splitk=3"),
            "cuda_sm80_f32_bwd_filter_nhwc_igemm_m32n16k4_t2x2_s2_sk3");
  const std::pair<const char*, const char*> bad[] = {
      {"algo=fast", "algo must be direct, igemm, mma or dw"},
      {"algo=mma", "algo=mma needs sm_80 or later and f16, bf16, f64 or f32 with TF32"},
      {"algo=igemm,tile=64x64", "tile needs 3 numbers"},
      {"algo=igemm,tile=64x64x8,micro=5x4", "not a multiple of micro"},
      {"algo=igemm,tile=128x128x64,micro=8x8", "shared memory"},
      {"algo=igemm,stages=3", "1 or 2 stages"},
      {"algo=igemm,tile=256x256x8", "over 64 accumulators"},
      {"algo=direct,threads=48", "multiple of 32"},
      {"algo=dw", "depthwise gradients (one input channel per group) only"},
      {"algo=direct,splitk=2", "does not apply"},
      {"speed=max", "unknown key 'speed'"},
      {"algo", "is not key=value"},
      {"algo=igemm,splitk=0", "not a positive integer"},
  };
  for (const auto& [forced, expected] : bad) {
    const std::string got = plan_name(d, "sm_80", MathMode::kExact, forced);
    EXPECT_NE(got.find(expected), std::string::npos) << forced << " -> " << got;
    EXPECT_EQ(got.rfind("error: ", 0), 0u) << forced;
  }
}

TEST(CudaBackend, StoredInterpretCodeReloadsWithoutCompiling) {
  runtime::Device device;
  device.kind = runtime::Device::Kind::kCudaInterpret;
  Expected<std::shared_ptr<const codegen::Backend>> backend =
      runtime::get_backend(device, "cuda", cpu::Isa::kGeneric);
  ASSERT_TRUE(backend.has_value()) << backend.status().to_string();
  const ConvProblem p = problem_of(filter_gradient(1, 7));
  Expected<std::unique_ptr<codegen::CompiledCode>> code =
      codegen::compile(**backend, p, codegen::PlanOptions{});
  ASSERT_TRUE(code.has_value()) << code.status().to_string();
  const codegen::Artifacts artifacts = (*code)->artifacts();
  for (const char* name : {"cu", "launches", "host_object"}) {
    EXPECT_TRUE(artifacts.count(name)) << "artifact " << name << " missing";
  }
  Expected<std::unique_ptr<codegen::CompiledCode>> loaded = (*backend)->load(artifacts);
  ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->name(), (*code)->name());
  TestTensor x = random_tensor(p.dtype, {1, 7, 7, 8}, 5),
             y = random_tensor(p.dtype, {1, 7, 7, 8}, 6);
  TestTensor w1(p.dtype, {3, 3, 8, 8}), w2(p.dtype, {3, 3, 8, 8});
  ASSERT_TRUE((*code)->run({x.data(), w1.data(), y.data()}, {}).is_ok());
  ASSERT_TRUE((*loaded)->run({x.data(), w2.data(), y.data()}, {}).is_ok());
  EXPECT_EQ(std::memcmp(w1.data(), w2.data(), 3 * 3 * 8 * 8 * 4), 0);
  // Damaged artifacts are refused, not run.
  codegen::Artifacts broken = artifacts;
  broken["launches"] = {'x'};
  EXPECT_FALSE((*backend)->load(broken).has_value());
}

}  // namespace
}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
