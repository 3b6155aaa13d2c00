// The CUDA source generators, one per algorithm, and what they share. Internal to the backend:
// generate_cuda_program() (cuda_source.cpp) calls them in the order the plan needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda/code_writer.hpp"
#include "codegen/cuda/cuda_plan.hpp"
#include "codegen/cuda/cuda_source.hpp"

namespace convjit::codegen::cuda_gen {

/// C++ names of the plan's element and accumulation types.
std::string elem_type(DType dtype);
std::string acc_type(DType dtype);
/// Whether element offsets need 64 bits (cj_index is then long long).
bool wide_index(const CudaPlan& plan);

/// The comment block, type aliases, problem constants, element-offset functions and
/// conversions every kernel of the program uses.
void emit_common(CodeWriter& out, const CudaPlan& plan);

/// Declarations of the tensor pointers a kernel uses, typed from cj_args, each `const` unless
/// it is the op's output. `roles` is a subset of "xwy".
void emit_tensor_pointers(CodeWriter& out, const CudaPlan& plan, std::string_view roles);

/// One implicit GEMM of the op, C[m, n] = sum over k of A[m, k] * B[k, n] per group, with the
/// three element-offset functions that gather A and B and scatter C (returning -1 where a
/// zero is read: padding, taps outside the output).
struct GemmSpec {
  std::string symbol;   // the kernel's name
  std::string tag;      // prefix of its offset functions
  std::string comment;  // what this GEMM is
  std::int64_t m = 0, n = 0, k = 0;
  char a = 'x', b = 'w', c = 'y';                         // tensor of each operand (x, w or y)
  std::vector<std::string> a_offset, b_offset, c_offset;  // function bodies, one line each
  /// k per split slice, and whether C goes to the workspace slices (split_k > 1).
  std::int64_t k_per_split = 0;
  int split_k = 1;
};
std::vector<GemmSpec> gemm_specs(const CudaPlan& plan);
void emit_gemm_offsets(CodeWriter& out, const GemmSpec& spec);

/// How a GEMM emitter writes its CTA: as a kernel of its own, or (`cta_function`) as a device
/// function `<symbol>_cta(args, block_m, a_tile, b_tile)` that the residue dispatcher kernel
/// calls with its shared arrays and the block's index within the GEMM's M tiles. The emitter
/// fills in its shared arrays' element type and sizes either way.
struct GemmCtaForm {
  bool cta_function = false;
  std::string shared_type;
  int a_elements = 0, b_elements = 0;
};

void emit_ffma_gemm_kernel(CodeWriter& out, const CudaPlan& plan, const GemmSpec& spec,
                           CudaLaunch* launch, GemmCtaForm* form);
void emit_mma_gemm_kernel(CodeWriter& out, const CudaPlan& plan, const GemmSpec& spec,
                          CudaLaunch* launch, GemmCtaForm* form);
/// The input gradient's residue classes in one launch (plan.fused_residues): blocks
/// [start_c, start_c + M tiles of class c) run class c's CTA function. `classes` are the
/// classes' own launches (as emitted in the cta_function form), `form` their shared arrays.
void emit_residue_dispatch_kernel(CodeWriter& out, const CudaPlan& plan,
                                  const std::vector<GemmSpec>& specs,
                                  const std::vector<CudaLaunch>& classes, const GemmCtaForm& form,
                                  CudaLaunch* launch);
void emit_direct_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch);
void emit_depthwise_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch);
/// Sums the split-K workspace slices of a filter gradient in slice order into w.
void emit_split_reduce_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch);
void emit_zero_fill_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch);

/// Grid size of a grid-stride loop over `count` items with `threads` per block.
std::uint32_t grid_stride_blocks(std::int64_t count, int threads);

}  // namespace convjit::codegen::cuda_gen
