#include "runtime/cuda/interpret/warp_ops.hpp"

#include <cmath>
#include <cstring>

#include "convjit/numeric.hpp"

namespace convjit::runtime::interpret {
namespace {

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t half_of(std::uint32_t reg, int which) {
  return static_cast<std::uint16_t>(which == 0 ? reg & 0xffffu : reg >> 16);
}

double sixteen_bit_value(std::uint16_t bits, bool bf16) {
  return bf16 ? static_cast<double>(bfloat16_to_float(bits))
              : static_cast<double>(half_to_float(bits));
}

}  // namespace

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": groupID = lane / 4,
// threadID_in_group = lane % 4.
RowCol m16n8k16_a(int lane, int i) {
  const int group = lane / 4, tig = lane % 4;
  const int row = group + ((i / 2) % 2) * 8;  // a0,a1: g; a2,a3: g+8; a4,a5: g; a6,a7: g+8
  const int col = tig * 2 + (i % 2) + (i / 4) * 8;
  return {row, col};
}
RowCol m16n8k16_b(int lane, int i) {
  const int group = lane / 4, tig = lane % 4;
  return {tig * 2 + (i % 2) + (i / 2) * 8, group};
}
RowCol m16n8_acc(int lane, int i) {
  const int group = lane / 4, tig = lane % 4;
  return {group + (i / 2) * 8, tig * 2 + (i % 2)};
}
RowCol m16n8k8_a(int lane, int i) {
  const int group = lane / 4, tig = lane % 4;
  return {group + (i % 2) * 8, tig + (i / 2) * 4};
}
RowCol m16n8k8_b(int lane, int i) {
  const int group = lane / 4, tig = lane % 4;
  return {tig + i * 4, group};
}
RowCol m8n8k4_a(int lane) { return {lane / 4, lane % 4}; }
RowCol m8n8k4_b(int lane) { return {lane % 4, lane / 4}; }
RowCol m8n8_acc(int lane, int i) { return {lane / 4, (lane % 4) * 2 + i}; }

void mma_m16n8k16(const std::uint32_t (&a)[kWarpSize][4], const std::uint32_t (&b)[kWarpSize][2],
                  float (&acc)[kWarpSize][4], bool bf16) {
  double A[16][16] = {}, B[16][8] = {};
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const RowCol rc = m16n8k16_a(lane, i);
      A[rc.row][rc.col] = sixteen_bit_value(half_of(a[lane][i / 2], i % 2), bf16);
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = m16n8k16_b(lane, i);
      B[rc.row][rc.col] = sixteen_bit_value(half_of(b[lane][i / 2], i % 2), bf16);
    }
  }
  // Products of 16-bit values are exact in double, as are their sums here; the accumulator
  // is rounded once to f32.
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = m16n8_acc(lane, i);
      double sum = acc[lane][i];
      for (int k = 0; k < 16; ++k) sum += A[rc.row][k] * B[k][rc.col];
      acc[lane][i] = static_cast<float>(sum);
    }
  }
}

void mma_m16n8k8_tf32(const std::uint32_t (&a)[kWarpSize][4],
                      const std::uint32_t (&b)[kWarpSize][2], float (&acc)[kWarpSize][4]) {
  auto tf32 = [](std::uint32_t u) { return static_cast<double>(bits_to_float(u & 0xffffe000u)); };
  double A[16][8] = {}, B[8][8] = {};
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = m16n8k8_a(lane, i);
      A[rc.row][rc.col] = tf32(a[lane][i]);
    }
    for (int i = 0; i < 2; ++i) {
      const RowCol rc = m16n8k8_b(lane, i);
      B[rc.row][rc.col] = tf32(b[lane][i]);
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = m16n8_acc(lane, i);
      double sum = acc[lane][i];
      for (int k = 0; k < 8; ++k) sum += A[rc.row][k] * B[k][rc.col];
      acc[lane][i] = static_cast<float>(sum);
    }
  }
}

void mma_m8n8k4_f64(const double (&a)[kWarpSize], const double (&b)[kWarpSize],
                    double (&acc)[kWarpSize][2]) {
  double A[8][4] = {}, B[4][8] = {};
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const RowCol ra = m8n8k4_a(lane);
    A[ra.row][ra.col] = a[lane];
    const RowCol rb = m8n8k4_b(lane);
    B[rb.row][rb.col] = b[lane];
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 2; ++i) {
      const RowCol rc = m8n8_acc(lane, i);
      double sum = acc[lane][i];
      for (int k = 0; k < 4; ++k) sum = std::fma(A[rc.row][k], B[k][rc.col], sum);
      acc[lane][i] = sum;
    }
  }
}

void ldmatrix(int matrices, bool transposed, const std::uint16_t (&rows)[4][8][8],
              std::uint32_t (&out)[kWarpSize][4]) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int j = 0; j < matrices; ++j) {
      const int r = lane / 4, c = (lane % 4) * 2;
      std::uint16_t lo, hi;
      if (transposed) {
        lo = rows[j][c][r];
        hi = rows[j][c + 1][r];
      } else {
        lo = rows[j][r][c];
        hi = rows[j][r][c + 1];
      }
      out[lane][j] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
    }
  }
}

void shuffle(ShuffleMode mode, const std::uint32_t (&values)[kWarpSize],
             const int (&operands)[kWarpSize], std::uint32_t (&out)[kWarpSize]) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int operand = operands[lane];
    int source = lane;
    switch (mode) {
      case ShuffleMode::kIndex:
        source = operand & 31;
        break;
      case ShuffleMode::kUp:
        source = lane - operand >= 0 ? lane - operand : lane;
        break;
      case ShuffleMode::kDown:
        source = lane + operand < kWarpSize ? lane + operand : lane;
        break;
      case ShuffleMode::kXor:
        source = (lane ^ operand) & 31;
        break;
    }
    out[lane] = values[source];
  }
}

}  // namespace convjit::runtime::interpret
