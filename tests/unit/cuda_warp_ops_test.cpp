// The warp-level operations of the interpret mode, each on its own against a plain matrix
// product or copy, with the fragment layouts written here from the PTX ISA's tables (not taken
// from the interpreter), so a wrong layout cannot hide in both the generator and the
// interpreter: first the pure functions, then test kernels run through the interpreter (the
// same kernels compile with NVRTC, so a GPU run can compare them with the hardware).
#ifdef CONVJIT_HAVE_CUDA

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/interpret/warp_ops.hpp"
#include "support/cuda_source_runner.hpp"
#include "support/cuda_warp_kernels.hpp"
#include "convjit/numeric.hpp"

namespace convjit::testing {
namespace {

using runtime::interpret::kWarpSize;

// ---- PTX ISA fragment layouts (groupID = lane >> 2, threadID_in_group = lane % 4).
// m16n8k16 A (16x16, .f16/.bf16): a0,a1 and a4,a5 in row groupID, a2,a3 and a6,a7 in row
// groupID + 8; column threadID_in_group * 2 + (i & 1), plus 8 for a4..a7.
int k16_a_row(int lane, int i) {
  return (i == 2 || i == 3 || i == 6 || i == 7) ? lane / 4 + 8 : lane / 4;
}
int k16_a_col(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
// m16n8k16 B (16x8): b0,b1 in rows threadID_in_group * 2 + (i & 1), b2,b3 8 rows lower;
// column groupID.
int k16_b_row(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
// m16n8 C/D (16x8 f32): c0,c1 in row groupID, c2,c3 in row groupID + 8; column
// threadID_in_group * 2 + (i & 1).
int c_row(int lane, int i) { return i < 2 ? lane / 4 : lane / 4 + 8; }
int c_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }
// m16n8k8 .tf32 A (16x8): a0 (groupID, tig), a1 (groupID + 8, tig), a2 (groupID, tig + 4),
// a3 (groupID + 8, tig + 4). B (8x8): b0 (tig, groupID), b1 (tig + 4, groupID).
int k8_a_row(int lane, int i) { return (i == 1 || i == 3) ? lane / 4 + 8 : lane / 4; }
int k8_a_col(int lane, int i) { return lane % 4 + (i >= 2 ? 4 : 0); }
int k8_b_row(int lane, int i) { return lane % 4 + (i == 1 ? 4 : 0); }

std::uint16_t to_bits(double v, bool bf16) {
  return bf16 ? float_to_bfloat16(static_cast<float>(v)) : float_to_half(static_cast<float>(v));
}

struct Mma16 {
  double a[16][16], b[16][8], c[16][8];
  std::uint32_t a_regs[kWarpSize][4] = {}, b_regs[kWarpSize][2] = {};
  float acc[kWarpSize][4] = {};
};

// Random 16-bit-exact matrices and their fragments.
Mma16 make_mma16(bool bf16, std::uint32_t seed) {
  Mma16 m;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-64, 64);
  for (auto& row : m.a)
    for (double& x : row) x = v(rng) / 32.0;
  for (auto& row : m.b)
    for (double& x : row) x = v(rng) / 32.0;
  for (auto& row : m.c)
    for (double& x : row) x = v(rng) / 8.0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t bits = to_bits(m.a[k16_a_row(lane, i)][k16_a_col(lane, i)], bf16);
      m.a_regs[lane][i / 2] |= bits << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t bits = to_bits(m.b[k16_b_row(lane, i)][lane / 4], bf16);
      m.b_regs[lane][i / 2] |= bits << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i)
      m.acc[lane][i] = static_cast<float>(m.c[c_row(lane, i)][c_col(lane, i)]);
  }
  return m;
}

double product16(const Mma16& m, int row, int col) {
  double sum = m.c[row][col];
  for (int k = 0; k < 16; ++k) sum += m.a[row][k] * m.b[k][col];
  return sum;
}

TEST(CudaWarpOps, Mma16x8x16MatchesMatrixProduct) {
  for (const bool bf16 : {false, true}) {
    Mma16 m = make_mma16(bf16, bf16 ? 7 : 3);
    runtime::interpret::mma_m16n8k16(m.a_regs, m.b_regs, m.acc, bf16);
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(m.acc[lane][i], static_cast<float>(product16(m, c_row(lane, i), c_col(lane, i))))
            << (bf16 ? "bf16" : "f16") << " lane " << lane << " d" << i;
      }
    }
  }
}

TEST(CudaWarpOps, Mma16x8x8Tf32MatchesMatrixProduct) {
  double a[16][8], b[8][8];
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> v(-512, 512);
  for (auto& row : a)
    for (double& x : row) x = v(rng) / 256.0;
  for (auto& row : b)
    for (double& x : row) x = v(rng) / 256.0;
  std::uint32_t a_regs[kWarpSize][4], b_regs[kWarpSize][2];
  float acc[kWarpSize][4] = {};
  auto bits = [](double x) {
    const float f = static_cast<float>(x);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u | 0x00000fffu;  // low bits the tensor cores ignore
  };
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) a_regs[lane][i] = bits(a[k8_a_row(lane, i)][k8_a_col(lane, i)]);
    for (int i = 0; i < 2; ++i) b_regs[lane][i] = bits(b[k8_b_row(lane, i)][lane / 4]);
  }
  runtime::interpret::mma_m16n8k8_tf32(a_regs, b_regs, acc);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) {
      double want = 0;
      for (int k = 0; k < 8; ++k) want += a[c_row(lane, i)][k] * b[k][c_col(lane, i)];
      EXPECT_EQ(acc[lane][i], static_cast<float>(want)) << "lane " << lane << " d" << i;
    }
  }
}

TEST(CudaWarpOps, Mma8x8x4F64MatchesMatrixProduct) {
  // m8n8k4 .f64: A a0 at (groupID, tig), B b0 at (tig, groupID), C c0,c1 at (groupID,
  // tig * 2 + i).
  double a[8][4], b[4][8], la[kWarpSize], lb[kWarpSize], acc[kWarpSize][2];
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> v(-1, 1);
  for (auto& row : a)
    for (double& x : row) x = v(rng);
  for (auto& row : b)
    for (double& x : row) x = v(rng);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    la[lane] = a[lane / 4][lane % 4];
    lb[lane] = b[lane % 4][lane / 4];
    acc[lane][0] = acc[lane][1] = 0.5;
  }
  runtime::interpret::mma_m8n8k4_f64(la, lb, acc);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 2; ++i) {
      double want = 0.5;
      for (int k = 0; k < 4; ++k) want += a[lane / 4][k] * b[k][(lane % 4) * 2 + i];
      EXPECT_NEAR(acc[lane][i], want, 1e-15) << "lane " << lane;
    }
  }
}

TEST(CudaWarpOps, LdmatrixMatchesCopy) {
  // Matrix j's row r is row 8j + r of a 32x8 tile of 16-bit values (row*8 + col + 1). A lane
  // receives, per matrix, (row lane/4, columns 2*(lane%4) and +1); .trans the transpose.
  std::uint16_t rows[4][8][8];
  for (int j = 0; j < 4; ++j)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c)
        rows[j][r][c] = static_cast<std::uint16_t>((8 * j + r) * 8 + c + 1);
  for (const int matrices : {1, 2, 4}) {
    for (const bool trans : {false, true}) {
      std::uint32_t out[kWarpSize][4] = {};
      runtime::interpret::ldmatrix(matrices, trans, rows, out);
      for (int lane = 0; lane < kWarpSize; ++lane) {
        for (int j = 0; j < matrices; ++j) {
          const int r = lane / 4, c = 2 * (lane % 4);
          const std::uint32_t lo = trans ? rows[j][c][r] : rows[j][r][c];
          const std::uint32_t hi = trans ? rows[j][c + 1][r] : rows[j][r][c + 1];
          EXPECT_EQ(out[lane][j], lo | (hi << 16))
              << "x" << matrices << (trans ? ".trans" : "") << " lane " << lane << " matrix " << j;
        }
      }
    }
  }
}

TEST(CudaWarpOps, ShuffleMatchesLaneCopy) {
  std::uint32_t values[kWarpSize], out[kWarpSize];
  int operands[kWarpSize];
  for (int l = 0; l < kWarpSize; ++l) values[l] = 100 + l;
  using runtime::interpret::ShuffleMode;
  for (int l = 0; l < kWarpSize; ++l) operands[l] = 5;
  runtime::interpret::shuffle(ShuffleMode::kXor, values, operands, out);
  for (int l = 0; l < kWarpSize; ++l) EXPECT_EQ(out[l], 100u + (l ^ 5));
  runtime::interpret::shuffle(ShuffleMode::kDown, values, operands, out);
  for (int l = 0; l < kWarpSize; ++l) EXPECT_EQ(out[l], 100u + (l + 5 < 32 ? l + 5 : l));
  runtime::interpret::shuffle(ShuffleMode::kUp, values, operands, out);
  for (int l = 0; l < kWarpSize; ++l) EXPECT_EQ(out[l], 100u + (l >= 5 ? l - 5 : l));
  for (int l = 0; l < kWarpSize; ++l) operands[l] = 31 - l;
  runtime::interpret::shuffle(ShuffleMode::kIndex, values, operands, out);
  for (int l = 0; l < kWarpSize; ++l) EXPECT_EQ(out[l], 100u + (31 - l));
}

// ---- The same operations through interpreted kernels (the portable layer end to end).

TEST(CudaWarpOps, InterpretedMmaMatchesMatrixProduct) {
  for (const bool bf16 : {false, true}) {
    const Mma16 m = make_mma16(bf16, 21);
    RawBuffers buffers;
    buffers.x = bytes_of(std::vector<std::uint32_t>(&m.a_regs[0][0], &m.a_regs[0][0] + 128));
    std::vector<std::uint32_t> w(&m.b_regs[0][0], &m.b_regs[0][0] + 64);
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int i = 0; i < 4; ++i) {
        std::uint32_t u;
        std::memcpy(&u, &m.acc[lane][i], 4);
        w.push_back(u);
      }
    }
    buffers.w = bytes_of(w);
    buffers.y.resize(3 * 128 * sizeof(float));
    ASSERT_TRUE(run_cuda_source("mma16", kMmaKernels, {{"mma16"}}, &buffers).is_ok());
    const std::vector<float> d = values_of<float>(buffers.y);
    const int shape = bf16 ? 1 : 0;  // the f16 or bf16 instruction on its own type's fragments
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(d[static_cast<std::size_t>(shape * 128 + lane * 4 + i)],
                  static_cast<float>(product16(m, c_row(lane, i), c_col(lane, i))))
            << (bf16 ? "bf16" : "f16") << " lane " << lane << " d" << i;
      }
    }
  }
  RawBuffers f64;
  std::vector<double> a(32), b(32);
  double am[8][4], bm[4][8];
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 4; ++k) am[r][k] = r - k * 0.25;
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 8; ++c) bm[k][c] = 0.5 * c + k;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    a[static_cast<std::size_t>(lane)] = am[lane / 4][lane % 4];
    b[static_cast<std::size_t>(lane)] = bm[lane % 4][lane / 4];
  }
  f64.x = bytes_of(a);
  f64.w = bytes_of(b);
  f64.y.resize(64 * sizeof(double));
  ASSERT_TRUE(run_cuda_source("mma_f64", kMmaKernels, {{"mma_f64"}}, &f64).is_ok());
  const std::vector<double> d = values_of<double>(f64.y);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 2; ++i) {
      double want = 0.5;
      for (int k = 0; k < 4; ++k) want += am[lane / 4][k] * bm[k][(lane % 4) * 2 + i];
      EXPECT_EQ(d[static_cast<std::size_t>(lane * 2 + i)], want) << "lane " << lane;
    }
  }
}

TEST(CudaWarpOps, InterpretedLdmatrixMatchesCopy) {
  RawBuffers buffers;
  buffers.y.resize(6 * 128 * sizeof(std::uint32_t), 0);
  ASSERT_TRUE(
      run_cuda_source("ldmatrix_all", kLdmatrixKernel, {{"ldmatrix_all"}}, &buffers).is_ok());
  const std::vector<std::uint32_t> out = values_of<std::uint32_t>(buffers.y);
  auto element = [](int row, int col) { return static_cast<std::uint32_t>(row * 8 + col + 1); };
  int variant = 0;
  for (const bool trans : {false, true}) {
    for (const int matrices : {1, 2, 4}) {
      for (int lane = 0; lane < kWarpSize; ++lane) {
        for (int j = 0; j < matrices; ++j) {
          const int r = lane / 4, c = 2 * (lane % 4);
          const std::uint32_t lo = trans ? element(8 * j + c, r) : element(8 * j + r, c);
          const std::uint32_t hi = trans ? element(8 * j + c + 1, r) : element(8 * j + r, c + 1);
          EXPECT_EQ(out[static_cast<std::size_t>(variant * 128 + lane * 4 + j)], lo | (hi << 16))
              << "x" << matrices << (trans ? ".trans" : "") << " lane " << lane << " reg " << j;
        }
      }
      ++variant;
    }
  }
}

TEST(CudaWarpOps, InterpretedCpAsyncGroupsAndZeroFill) {
  std::vector<float> src(64);
  for (int i = 0; i < 64; ++i) src[static_cast<std::size_t>(i)] = 10.0f + i;
  std::vector<std::uint32_t> pairs(64);
  for (int i = 0; i < 64; ++i)
    pairs[static_cast<std::size_t>(i)] = 1000u + static_cast<std::uint32_t>(i);
  RawBuffers buffers;
  buffers.x = bytes_of(src);
  buffers.w = bytes_of(pairs);
  buffers.y.resize(32 * 8 * sizeof(float));
  const Status s =
      run_cuda_source("cp_async_groups", kCpAsyncKernel, {{"cp_async_groups"}}, &buffers);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::vector<float> out = values_of<float>(buffers.y);
  for (int t = 0; t < 32; ++t) {
    const float* o = &out[static_cast<std::size_t>(t * 8)];
    EXPECT_EQ(o[0], -1.0f) << "lane " << t << ": a copy not waited on is visible";
    EXPECT_EQ(o[1], 10.0f + t) << "lane " << t;
    EXPECT_EQ(o[2], -2.0f) << "lane " << t << ": wait_group 1 completed the newest group";
    EXPECT_EQ(o[3], 42.0f + t) << "lane " << t;
    EXPECT_EQ(o[4], 1000.0f + 2 * t) << "lane " << t;
    EXPECT_EQ(o[5], t % 2 == 0 ? 1001.0f + 2 * t : 0.0f) << "lane " << t << ": zero-fill";
    EXPECT_EQ(o[6], 10.0f + (t + 1) % 32) << "lane " << t;
    EXPECT_EQ(o[7], 0.0f) << "lane " << t;
  }
}

TEST(CudaWarpOps, InterpretedShuffleMatchesLaneCopy) {
  RawBuffers buffers;
  buffers.y.resize(64 * 4 * sizeof(std::uint32_t));
  const Status s =
      run_cuda_source("shuffles", kShuffleKernel, {{"shuffles", {1, 1, 1}, {64, 1, 1}}}, &buffers);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::vector<std::uint32_t> out = values_of<std::uint32_t>(buffers.y);
  for (int t = 0; t < 64; ++t) {
    const int warp = t / 32 * 32, lane = t % 32;
    auto v = [&](int l) { return 3u * static_cast<std::uint32_t>(warp + l) + 1u; };
    EXPECT_EQ(out[static_cast<std::size_t>(t * 4 + 0)], v(lane ^ 5)) << t;
    EXPECT_EQ(out[static_cast<std::size_t>(t * 4 + 1)], v(lane + 3 < 32 ? lane + 3 : lane)) << t;
    EXPECT_EQ(out[static_cast<std::size_t>(t * 4 + 2)], v(31 - lane)) << t;
    EXPECT_EQ(out[static_cast<std::size_t>(t * 4 + 3)], v(lane ^ 16)) << t;
  }
}

// The test kernels are CUDA C++ NVRTC accepts, so a GPU run can check them against the
// hardware (.ci/gpu-check).
TEST(CudaWarpOps, TestKernelsCompileWithNvrtc) {
  for (const char* body : {kMmaKernels, kLdmatrixKernel, kCpAsyncKernel, kShuffleKernel}) {
    const Status s = cuda_source_compiles("warp_op_test", body, "sm_80");
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
}

}  // namespace
}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
