// The interpret mode's checks, each shown a kernel with a planted fault it must report (naming
// the kernel, block, thread and line) without crashing, and the fault-free version it must
// accept: a missing __syncthreads() (race), an off-by-one tile bound (out of bounds, shared and
// global), a read of shared memory nobody wrote, barrier and warp-operation divergence,
// cp.async copies never waited for, and a write to an input.
#ifdef CONVJIT_HAVE_CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/cuda_source_runner.hpp"

namespace convjit::testing {
namespace {

// One source, two kernels: the faulty one and its fixed twin.
/// "line N" of the kernel body holding `marker` (a comment on the line).
std::string line_of(const char* body, const std::string& marker) {
  const std::string text(body);
  const std::size_t at = text.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  return "line " +
         std::to_string(
             1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

struct Planted {
  const char* name;
  const char* faulty;
  const char* fixed;
  std::vector<std::string> expected;  // pieces the report must contain; "@marker" means the
                                      // "line N" of the line with that marker
};

Status run(const char* symbol, const char* body, std::uint32_t blocks = 2,
           std::uint32_t threads = 64) {
  RawBuffers buffers;
  buffers.x.assign(256 * sizeof(float), 0);
  buffers.y.assign(256 * sizeof(float), 0);
  return run_cuda_source("planted", body, {{symbol, {blocks, 1, 1}, {threads, 1, 1}}}, &buffers);
}

const char* kKernels = R"cuda(
// A tile shared by the block, updated in place: each thread writes its element and reads its
// neighbour's, with the barrier between the update and the read missing.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) missing_barrier(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  const int t = threadIdx.x;
  CJ_STS(tile, t, 0.0f);
  __syncthreads();
  CJ_STS(tile, t, (float)t);  // @race-write
  CJ_STG(out, blockIdx.x * 64 + t, CJ_LDS(tile, (t + 1) % 64));  // @race-read
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) with_barrier(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  const int t = threadIdx.x;
  CJ_STS(tile, t, 0.0f);
  __syncthreads();
  CJ_STS(tile, t, (float)t);
  __syncthreads();
  CJ_STG(out, blockIdx.x * 64 + t, CJ_LDS(tile, (t + 1) % 64));
}
// Staging a 64-element tile with a loop bound one too far.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) off_by_one_tile(cj_args args) {
  const float* in = static_cast<const float*>(args.x);
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  for (int e = threadIdx.x; e <= 64; e += 64) CJ_STS(tile, e, CJ_LDG(in, e));  // @off-by-one
  __syncthreads();
  CJ_STG(out, threadIdx.x, CJ_LDS(tile, threadIdx.x));
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) exact_tile(cj_args args) {
  const float* in = static_cast<const float*>(args.x);
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  for (int e = threadIdx.x; e < 64; e += 64) CJ_STS(tile, e, CJ_LDG(in, e));
  __syncthreads();
  CJ_STG(out, threadIdx.x, CJ_LDS(tile, threadIdx.x));
}
// A global index one past the output (256 floats) in the last block.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) global_past_end(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_STG(out, blockIdx.x * 64 + threadIdx.x + 1, 1.0f);
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) global_in_bounds(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_STG(out, blockIdx.x * 64 + threadIdx.x, 1.0f);
}
// Half of a tile is written, all of it read.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) uninitialised_read(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  if (threadIdx.x < 32) CJ_STS(tile, threadIdx.x, 1.0f);
  __syncthreads();
  CJ_STG(out, threadIdx.x, CJ_LDS(tile, threadIdx.x));
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) initialised_read(cj_args args) {
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  CJ_STS(tile, threadIdx.x, 1.0f);
  __syncthreads();
  CJ_STG(out, threadIdx.x, CJ_LDS(tile, threadIdx.x));
}
// A barrier only some threads reach.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) divergent_barrier(cj_args args) {
  float* out = static_cast<float*>(args.y);
  if (threadIdx.x < 16) {
    __syncthreads();  // @barrier-a
  } else {
    __syncthreads();  // @barrier-b
  }
  CJ_STG(out, threadIdx.x, 1.0f);
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) uniform_barrier(cj_args args) {
  float* out = static_cast<float*>(args.y);
  __syncthreads();
  CJ_STG(out, threadIdx.x, 1.0f);
}
// A shuffle half a warp skips.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) divergent_shuffle(cj_args args) {
  float* out = static_cast<float*>(args.y);
  float v = (float)threadIdx.x;
  if (threadIdx.x % 32 < 16) v = cj_shfl_xor(v, 1);  // @shuffle
  CJ_STG(out, threadIdx.x, v);
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) uniform_shuffle(cj_args args) {
  float* out = static_cast<float*>(args.y);
  float v = cj_shfl_xor((float)threadIdx.x, 1);
  CJ_STG(out, threadIdx.x, v);
}
// A copy committed but never waited for.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) copy_never_waited(cj_args args) {
  const float* in = static_cast<const float*>(args.x);
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  cj_cp_async_4(&tile[threadIdx.x], in + threadIdx.x, 4);  // @copy
  cj_cp_async_commit();
  CJ_STG(out, threadIdx.x, 1.0f);
}
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) copy_waited(cj_args args) {
  const float* in = static_cast<const float*>(args.x);
  float* out = static_cast<float*>(args.y);
  CJ_SHARED(float, tile, 64);
  cj_cp_async_4(&tile[threadIdx.x], in + threadIdx.x, 4);
  cj_cp_async_commit();
  cj_cp_async_wait<0>();
  CJ_STG(out, threadIdx.x, CJ_LDS(tile, threadIdx.x));
}
// Writing into an input tensor.
CJ_KERNEL void CJ_LAUNCH_BOUNDS(64, 1) writes_input(cj_args args) {
  float* in = static_cast<float*>(args.x);
  CJ_STG(in, threadIdx.x, 2.0f);
}
)cuda";

const Planted kPlanted[] = {
    {"missing __syncthreads()",
     "missing_barrier",
     "with_barrier",
     {"kernel missing_barrier", "block (0,0,0)", "thread (1,0,0)", "shared-memory race",
      "read by thread (0,0,0) (", "@race-read", "no __syncthreads() between", "of tile",
      "@race-write"}},
    {"off-by-one shared tile bound",
     "off_by_one_tile",
     "exact_tile",
     {"kernel off_by_one_tile", "thread (0,0,0)", "out-of-bounds shared write of 4 bytes",
      "element 64 of 64", "tile", "@off-by-one"}},
    {"global index past the end",
     "global_past_end",
     "global_in_bounds",
     {"kernel global_past_end", "block (3,0,0)", "thread (63,0,0)",
      "out-of-bounds global write of 4 bytes at byte offset 1024 of y"}},
    {"uninitialised shared read",
     "uninitialised_read",
     "initialised_read",
     {"thread (32,0,0)", "read of uninitialised shared memory", "offset 128 of tile"}},
    {"divergent barrier",
     "divergent_barrier",
     "uniform_barrier",
     {"divergent barriers", "thread (0,0,0)", "__syncthreads()", "@barrier-a", "thread (16,0,0)",
      "@barrier-b"}},
    {"divergent shuffle",
     "divergent_shuffle",
     "uniform_shuffle",
     {"divergent warp-level operation", "warp 0", "@shuffle", "16 lanes that exited"}},
    {"cp.async never waited for",
     "copy_never_waited",
     "copy_waited",
     {"cp.async copies", "never waited for", "@copy"}},
    {"write to an input", "writes_input", "global_in_bounds", {"read-only input x"}},
};

class CudaInterpretChecks : public ::testing::TestWithParam<Planted> {};

TEST_P(CudaInterpretChecks, ReportsThePlantedFault) {
  const Planted& p = GetParam();
  const std::uint32_t blocks = std::string(p.faulty) == "global_past_end" ? 4 : 2;
  const Status faulty = run(p.faulty, kKernels, blocks);
  ASSERT_FALSE(faulty.is_ok()) << p.name << " went unreported";
  for (std::string piece : p.expected) {
    if (piece[0] == '@') piece = line_of(kKernels, piece);
    EXPECT_NE(faulty.message().find(piece), std::string::npos)
        << p.name << ": the report lacks \"" << piece << "\":\n"
        << faulty.message();
  }
  const Status fixed = run(p.fixed, kKernels, blocks);
  EXPECT_TRUE(fixed.is_ok()) << p.name << ", fixed: " << fixed.to_string();
}

INSTANTIATE_TEST_SUITE_P(Planted, CudaInterpretChecks, ::testing::ValuesIn(kPlanted),
                         [](const ::testing::TestParamInfo<Planted>& info) {
                           return std::string(info.param.faulty);
                         });

TEST(CudaInterpretChecks, PlantedKernelsCompileWithNvrtc) {
  const Status s = cuda_source_compiles("planted", kKernels, "sm_80");
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

// Running the blocks on several host threads reports the same fault, once per launch.
TEST(CudaInterpretChecks, ParallelBlocksReportOnce) {
  RawBuffers buffers;
  buffers.y.assign(256 * sizeof(float), 0);
  const Status s = run_cuda_source("planted", kKernels,
                                   {{"missing_barrier", {4, 1, 1}, {64, 1, 1}}}, &buffers, 3);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("shared-memory race"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
