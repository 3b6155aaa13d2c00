// CudaPlan: every decision the CUDA backend's generated code depends on, made in one place
// (make_cuda_plan) from the ConvProblem, the device and the caller's options. The generators
// carry it out and decide nothing; the kernel's name is printed from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/backend.hpp"
#include "codegen/cuda/cuda_device_info.hpp"
#include "frontend/problem.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// How a CUDA kernel computes its op.
enum class CudaAlgorithm : std::uint8_t {
  kZeroFill,      // some operand is empty: the output is zeros
  kDirect,        // one thread per output element, the reduction in a loop (every op)
  kImplicitGemm,  // CTA tiles in shared memory, FFMA register tiles (fwd, dgrad by residue
                  // class, wgrad with split-K)
  kTensorCore,    // the same GEMMs on mma.sync, operands through a cp.async pipeline
  kDepthwise,     // depthwise gradients: shared-memory filter tiles (dgrad) and a
                  // shared-memory reduction tile (wgrad, with split-K)
};

/// kTensorCore: how one GEMM operand reaches shared memory. Its tile is stored in the order
/// the tensor has in memory, so the copies read consecutive addresses: rows of k
/// ([m or n][k]; 16-bit fragments by ldmatrix) where the unit stride runs along K, rows of m
/// or n ([k][m or n]; ldmatrix.trans) where it runs along M or N.
struct CudaOperandTile {
  bool k_contiguous = true;
  /// Every aligned run of 16 bytes along the contiguous dimension is one tap of one pixel
  /// (one validity) and 16-byte aligned when the tensor is: the copies are 16-byte cp.async
  /// (element by element where the tensor's address is not 16-byte aligned).
  bool vector = false;
};

/// The arithmetic of the inner product.
enum class CudaMath : std::uint8_t {
  kFfma,     // scalar fused multiply-add in the accumulation type
  kMmaF16,   // mma.sync.m16n8k16 f16 inputs, f32 accumulate
  kMmaBf16,  // mma.sync.m16n8k16 bf16 inputs, f32 accumulate
  kMmaTf32,  // mma.sync.m16n8k8 tf32 inputs (rounded from f32), f32 accumulate
  kMmaF64,   // mma.sync.m8n8k4 f64 (DMMA)
};

std::string_view algorithm_name(CudaAlgorithm algorithm);

class CudaPlan final : public Plan {
 public:
  ConvProblem problem;
  CudaDeviceInfo device;
  MathMode math_mode = MathMode::kExact;
  bool deterministic = true;

  CudaAlgorithm algorithm = CudaAlgorithm::kDirect;
  CudaMath math = CudaMath::kFfma;
  /// Threads per block of the main kernel.
  int threads = 256;
  /// GEMM algorithms: the CTA tile (M x N x K).
  int tile_m = 0, tile_n = 0, tile_k = 0;
  /// kImplicitGemm: each thread's register tile (tile_m / micro_m rows of threads).
  int micro_m = 0, micro_n = 0;
  /// kTensorCore: warps along M and N (each warp owns a (tile_m/warps_m) x (tile_n/warps_n)
  /// block of mma fragments); each operand's shared tile. GEMM algorithms: shared stages (the
  /// cp.async pipeline's; the FFMA kernel's double buffer, 1 or 2).
  int warps_m = 0, warps_n = 0, stages = 1;
  CudaOperandTile operand_a, operand_b;
  /// Strided input gradients (GEMM algorithms): all stride-residue classes in one launch, each
  /// block running one class's CTA, rather than one launch per class.
  bool fused_residues = false;
  /// Filter gradients: slices the N*OH*OW reduction is split into (each writes an
  /// accumulation-type workspace slice, summed in a fixed order by a second kernel).
  int split_k = 1;
  /// kDepthwise: channels per block (threadIdx.x); dgrad: pixels per block (threadIdx.y);
  /// wgrad: reduction rows (threadIdx.y) and depth multipliers per block.
  int channel_block = 0;
  int pixel_block = 0;
  int multiplier_block = 0;

  /// Printed from the fields above by cuda_kernel_name(); see docs/CUDA.md.
  std::string kernel_name;
  /// CONVJIT_CUDA_TUNE: what tuning measured ("tuned 5 plans in 640 ms: ..."), empty otherwise.
  std::string tuning;

  std::string describe() const override;
  /// Bytes of device workspace one run needs (split-K partial sums).
  std::size_t workspace_bytes() const;
  /// Shared memory the main kernel declares.
  int shared_bytes() const;
  /// GEMM algorithms: elements per row of an operand's shared tile (kTensorCore: a row of k,
  /// or of m or n, padded so that the eight rows one ldmatrix or fragment load reads fall in
  /// different banks; kImplicitGemm: a row of m or n), and elements per stage of it.
  int shared_row(bool of_a) const;
  int shared_stage_elements(bool of_a) const;
  /// The accumulation type's size: 8 for f64, else 4.
  int accumulator_bytes() const { return problem.dtype == DType::kFloat64 ? 8 : 4; }
};

/// The plan for `problem` on `device`. options.forced ("algo=igemm,tile=64x32x8,...", keys in
/// docs/CUDA.md) overrides the model's choices; a forced choice that cannot work for this
/// problem or device is InvalidArgument saying why.
Expected<std::unique_ptr<CudaPlan>> make_cuda_plan(const ConvProblem& problem,
                                                   const CudaDeviceInfo& device,
                                                   const PlanOptions& options);

/// The kernel name printed from a plan, e.g. "cuda_sm80_f32_bwd_data_nhwc_igemm_m64n32k8_t4x2".
std::string cuda_kernel_name(const CudaPlan& plan);

}  // namespace convjit::codegen
