// The semantics of the warp-level operations the CUDA backend's kernels use, on the 32 lanes'
// registers gathered into arrays: mma.sync (fragment-to-lane layouts of the PTX ISA), ldmatrix
// (given the rows each lane addresses) and shfl.sync. Pure functions, so each is tested on its
// own against a plain matrix product or copy (tests/unit/cuda_warp_ops_test.cpp).
#pragma once

#include <array>
#include <cstdint>

namespace convjit::runtime::interpret {

inline constexpr int kWarpSize = 32;

/// d = a * b + c for mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: per lane 4 A
/// registers (8 16-bit values), 2 B registers (4 values), 4 f32 accumulators.
void mma_m16n8k16(const std::uint32_t (&a)[kWarpSize][4], const std::uint32_t (&b)[kWarpSize][2],
                  float (&acc)[kWarpSize][4], bool bf16);
/// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: 4 A and 2 B registers holding TF32
/// values (the low 13 bits are ignored, as the tensor cores do).
void mma_m16n8k8_tf32(const std::uint32_t (&a)[kWarpSize][4],
                      const std::uint32_t (&b)[kWarpSize][2], float (&acc)[kWarpSize][4]);
/// mma.sync.aligned.m8n8k4.row.col.f64: 1 A and 1 B value, 2 accumulators per lane.
void mma_m8n8k4_f64(const double (&a)[kWarpSize], const double (&b)[kWarpSize],
                    double (&acc)[kWarpSize][2]);

/// Where lane `lane`'s values of each fragment sit in the matrices (PTX ISA layouts):
/// m16n8k16 A value i (0..7) of a lane, B value i (0..3), and accumulator i (0..3).
struct RowCol {
  int row, col;
};
RowCol m16n8k16_a(int lane, int i);
RowCol m16n8k16_b(int lane, int i);  // row = k, col = n
RowCol m16n8_acc(int lane, int i);
RowCol m16n8k8_a(int lane, int i);  // i < 4
RowCol m16n8k8_b(int lane, int i);  // i < 2
RowCol m8n8k4_a(int lane);
RowCol m8n8k4_b(int lane);
RowCol m8n8_acc(int lane, int i);  // i < 2

/// ldmatrix.m8n8.x{1,2,4}[.trans].b16: `rows[j][r]` is the 16-byte row r of matrix j (the
/// memory lane 8*j + r addressed), as 8 16-bit values; out[lane][j] receives the lane's
/// register j.
void ldmatrix(int matrices, bool transposed, const std::uint16_t (&rows)[4][8][8],
              std::uint32_t (&out)[kWarpSize][4]);

/// shfl.sync with all 32 lanes and width 32: the value each lane receives.
enum class ShuffleMode { kIndex, kUp, kDown, kXor };
void shuffle(ShuffleMode mode, const std::uint32_t (&values)[kWarpSize],
             const int (&operands)[kWarpSize], std::uint32_t (&out)[kWarpSize]);

}  // namespace convjit::runtime::interpret
