#include "cuda/cuda_test_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "reference/naive.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/thread_pool.hpp"
#include "support/test_tensors.hpp"

namespace convjit::testing {

std::shared_ptr<const codegen::Backend> cuda_interpret_backend() {
  runtime::Device device;
  device.kind = runtime::Device::Kind::kCudaInterpret;
  Expected<std::shared_ptr<const codegen::Backend>> backend =
      runtime::get_backend(device, "cuda", cpu::Isa::kGeneric);
  EXPECT_TRUE(backend.has_value()) << backend.status().to_string();
  return backend.has_value() ? *backend : nullptr;
}

std::vector<CudaJob> forced_jobs(const ConvProblem& p, const std::string& label, int variant) {
  std::vector<CudaJob> jobs;
  if (p.is_empty()) return jobs;
  auto add = [&](std::string forced, MathMode math = MathMode::kExact) {
    jobs.push_back({p, label, std::move(forced), math});
  };
  add("algo=direct,threads=" + std::string(variant % 2 == 0 ? "64" : "256"));
  const bool wgrad = p.direction == ConvDirection::kBackpropFilter;
  // FFMA tiles: the model's, a tall one, and a small one with 1x1 register tiles.
  const char* ffma_tiles[] = {"", ",tile=32x8x8,micro=2x1", ",tile=16x16x4,micro=1x1",
                              ",tile=64x32x8,micro=4x2"};
  // Strided input gradients: the residue classes in one launch and in one launch each.
  const bool classes = p.direction == ConvDirection::kBackpropData &&
                       (p.stride_h > 1 || p.stride_w > 1);
  const std::string split = wgrad     ? fmt::format(",splitk={}", 1 + variant % 4)
                            : classes ? fmt::format(",fuse={}", variant % 2)
                                      : "";
  add("algo=igemm" + std::string(ffma_tiles[variant % 4]) + split);
  // Tensor cores: f16/bf16 and f64 always; f32 through TF32.
  const MathMode mma_math = p.dtype == DType::kFloat32 ? MathMode::kTF32 : MathMode::kExact;
  const bool f64 = p.dtype == DType::kFloat64;
  const bool sixteen = p.dtype == DType::kHalf || p.dtype == DType::kBFloat16;
  std::string mma_tile;
  switch (variant % 3) {
    case 0:
      mma_tile = "";
      break;
    case 1:
      mma_tile = f64 ? ",tile=16x16x4,warps=1x1"
                     : ",tile=32x16x" + std::string(sixteen ? "16" : "8") + ",warps=2x1";
      break;
    default:
      mma_tile = f64 ? ",tile=32x32x8,warps=2x2"
                     : ",tile=64x64x" + std::string(sixteen ? "32" : "16") + ",warps=2x2";
      break;
  }
  if (!sixteen) mma_tile += fmt::format(",stages={}", 1 + variant % 3);
  add("algo=mma" + mma_tile + split, mma_math);
  if (p.filter_in == 1 && p.direction != ConvDirection::kForward) {
    const char* dw[] = {"", ",cblock=1,pblock=32", ",cblock=2,pblock=16", ",cblock=8,pblock=4"};
    std::string keys = "algo=dw" + std::string(dw[variant % 4]);
    if (wgrad) keys += fmt::format(",mblock={},splitk={}", 1 + variant % 2, 1 + variant % 3);
    add(keys);
  }
  return jobs;
}

namespace {

Tolerance job_tolerance(const CudaJob& job) {
  const std::int64_t length = reduction_length(job.problem);
  if (job.math == MathMode::kTF32 && job.problem.dtype == DType::kFloat32) {
    // Inputs rounded to 10 mantissa bits: each product is off by up to 2^-10 relative.
    const double l = static_cast<double>(std::max<std::int64_t>(length, 1));
    return {l * 0x1p-10 + 0x1p-20, 0x1p-10};
  }
  return tolerance(job.problem.dtype, length);
}

}  // namespace

std::string run_interpreted_job(const CudaJob& job, std::uint64_t seed, bool repeat,
                                std::string* kernel) {
  const ConvProblem& p = job.problem;
  std::shared_ptr<const codegen::Backend> backend = cuda_interpret_backend();
  if (backend == nullptr) return "no interpret backend";
  codegen::PlanOptions options;
  options.forced = job.forced;
  options.math_mode = job.math;
  Expected<std::unique_ptr<codegen::CompiledCode>> code = codegen::compile(*backend, p, options);
  if (!code) return "compile: " + code.status().to_string();
  *kernel = (*code)->name();
  // A forced algorithm must be the one that ran (its name is in the kernel's name).
  if (job.forced.rfind("algo=", 0) == 0) {
    const std::string algo = job.forced.substr(5, job.forced.find(',') - 5);
    const std::string token = algo == "dw" ? "_dw_c" : "_" + algo + "_";
    if (kernel->find(token) == std::string::npos) {
      return "forced algo=" + algo + " but the kernel is " + *kernel;
    }
  }
  auto shape_of = [&](TensorRole role) {
    const auto s = p.shape(role);
    return std::vector<std::int64_t>(s.begin(), s.end());
  };
  const TensorRole out_role = p.output_role();
  TestTensor x = random_tensor(p.dtype, shape_of(TensorRole::kX), seed);
  TestTensor w = random_tensor(p.dtype, shape_of(TensorRole::kW), seed + 1);
  TestTensor y = random_tensor(p.dtype, shape_of(TensorRole::kY), seed + 2);
  TestTensor* out = out_role == TensorRole::kX ? &x : out_role == TensorRole::kW ? &w : &y;
  TestTensor want(p.dtype, shape_of(out_role));
  OperandPointers reference_ptrs{x.data(), w.data(), y.data()};
  (out_role == TensorRole::kX   ? reference_ptrs.x
   : out_role == TensorRole::kW ? reference_ptrs.w
                                : reference_ptrs.y) = want.data();
  run_reference(p, reference_ptrs);
  out->fill(std::numeric_limits<double>::quiet_NaN());  // unwritten elements cannot pass
  OperandPointers run_ptrs{x.data(), w.data(), y.data()};
  // job.misaligned: the kernel runs on copies placed one element past a 16-byte boundary.
  const std::size_t elem = static_cast<std::size_t>(dtype_size(p.dtype));
  auto bytes_of = [&](const TestTensor& t) { return static_cast<std::size_t>(t.elements()) * elem; };
  std::vector<std::byte> shifted[3];
  TestTensor* tensors[3] = {&x, &w, &y};
  void** pointers[3] = {&run_ptrs.x, &run_ptrs.w, &run_ptrs.y};
  if (job.misaligned) {
    for (int i = 0; i < 3; ++i) {
      shifted[i].resize(bytes_of(*tensors[i]) + 32);
      std::byte* base = shifted[i].data();
      base += (16 - reinterpret_cast<std::uintptr_t>(base) % 16) % 16 + elem;
      if (bytes_of(*tensors[i]) > 0) std::memcpy(base, tensors[i]->data(), bytes_of(*tensors[i]));
      *pointers[i] = base;
    }
  }
  auto copy_out_back = [&] {
    if (job.misaligned && bytes_of(*out) > 0) {
      std::memcpy(out->data(), run_ptrs.get(out_role), bytes_of(*out));
    }
  };
  codegen::RunContext context;
  context.parallel_for = runtime::resolve_parallel_for({}, repeat ? 3 : 1);
  Status s = (*code)->run(run_ptrs, context);
  if (!s.is_ok()) return "run: " + s.to_string();
  copy_out_back();
  const ::testing::AssertionResult close = all_close(out->view(), want.view(), job_tolerance(job));
  if (!close) return close.message();
  if (repeat) {
    TestTensor first = *out;
    out->fill(std::numeric_limits<double>::quiet_NaN());
    if (job.misaligned && bytes_of(*out) > 0) {
      std::memcpy(run_ptrs.get(out_role), out->data(), bytes_of(*out));
    }
    s = (*code)->run(run_ptrs, context);
    if (!s.is_ok()) return "second run: " + s.to_string();
    copy_out_back();
    const std::size_t bytes =
        static_cast<std::size_t>(out->elements()) * static_cast<std::size_t>(dtype_size(p.dtype));
    if (bytes > 0 && std::memcmp(first.data(), out->data(), bytes) != 0) {
      return "two runs gave different bits";
    }
  }
  return {};
}

std::vector<std::string> run_jobs_in_parallel(const std::vector<CudaJob>& jobs, std::uint64_t seed,
                                              int* kernels_run) {
  std::atomic<std::size_t> next{0};
  std::atomic<int> ran{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      const CudaJob& job = jobs[i];
      std::string kernel;
      const bool repeat = job.problem.direction == ConvDirection::kBackpropFilter;
      const std::string problem = run_interpreted_job(job, seed + 11 * i, repeat, &kernel);
      ++ran;
      if (problem.empty()) continue;
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back(fmt::format("{} [{}{}] kernel {}: {}", job.label, job.forced,
                                     job.math == MathMode::kTF32 ? " tf32" : "", kernel, problem));
    }
  };
  std::vector<std::thread> threads;
  const unsigned count = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < count; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  *kernels_run = ran.load();
  return failures;
}

}  // namespace convjit::testing
