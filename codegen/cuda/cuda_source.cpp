// generate_cuda_program: the plan's kernels in one translation unit, and their launches.
#include "codegen/cuda/cuda_source.hpp"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "codegen/cuda/cuda_generators.hpp"
#include "codegen/cuda/cuda_prelude.hpp"

namespace convjit::codegen {

using namespace cuda_gen;

namespace {

constexpr std::uint32_t kMaxGridYZ = 65535;

Status check_launch(const CudaLaunch& launch) {
  if (launch.grid[1] > kMaxGridYZ || launch.grid[2] > kMaxGridYZ || launch.grid[0] == 0) {
    return unimplemented(
        fmt::format("CUDA launch {} needs a grid of {}x{}x{} blocks, beyond the "
                    "device's limits (y and z at most 65535)",
                    launch.symbol, launch.grid[0], launch.grid[1], launch.grid[2]));
  }
  return Status::ok();
}

}  // namespace

Expected<CudaProgram> generate_cuda_program(const CudaPlan& plan) {
  CudaProgram program;
  program.kernel_name = plan.kernel_name;
  program.workspace_bytes = plan.workspace_bytes();
  const ConvProblem& p = plan.problem;
  const std::int64_t elem = dtype_size(p.dtype);
  program.x_bytes = p.elements(TensorRole::kX) * elem;
  program.w_bytes = p.elements(TensorRole::kW) * elem;
  program.y_bytes = p.elements(TensorRole::kY) * elem;
  const TensorRole out_role = p.output_role();
  program.output = out_role == TensorRole::kX ? 'x' : out_role == TensorRole::kW ? 'w' : 'y';
  CodeWriter out;
  emit_common(out, plan);
  auto add = [&](CudaLaunch launch) { program.launches.push_back(std::move(launch)); };
  switch (plan.algorithm) {
    case CudaAlgorithm::kZeroFill: {
      if (p.elements(p.output_role()) == 0) break;  // nothing to write: no kernel at all
      CudaLaunch launch;
      emit_zero_fill_kernel(out, plan, &launch);
      add(launch);
      break;
    }
    case CudaAlgorithm::kDirect: {
      CudaLaunch launch;
      emit_direct_kernel(out, plan, &launch);
      add(launch);
      break;
    }
    case CudaAlgorithm::kImplicitGemm:
    case CudaAlgorithm::kTensorCore: {
      // One kernel per GEMM, or the input gradient's residue classes as CTA functions of one
      // dispatching kernel.
      const std::vector<GemmSpec> specs = gemm_specs(plan);
      GemmCtaForm form;
      form.cta_function = plan.fused_residues;
      std::vector<CudaLaunch> launches;
      for (const GemmSpec& spec : specs) {
        CudaLaunch launch;
        if (plan.algorithm == CudaAlgorithm::kTensorCore) {
          emit_mma_gemm_kernel(out, plan, spec, &launch, &form);
        } else {
          emit_ffma_gemm_kernel(out, plan, spec, &launch, &form);
        }
        launches.push_back(launch);
      }
      if (plan.fused_residues) {
        CudaLaunch launch;
        emit_residue_dispatch_kernel(out, plan, specs, launches, form, &launch);
        add(launch);
      } else {
        for (CudaLaunch& launch : launches) add(std::move(launch));
      }
      if (plan.split_k > 1) {
        CudaLaunch launch;
        emit_split_reduce_kernel(out, plan, &launch);
        add(launch);
      }
      break;
    }
    case CudaAlgorithm::kDepthwise: {
      CudaLaunch launch;
      emit_depthwise_kernel(out, plan, &launch);
      add(launch);
      if (plan.split_k > 1) {
        CudaLaunch reduce;
        emit_split_reduce_kernel(out, plan, &reduce);
        add(reduce);
      }
      break;
    }
  }
  for (const CudaLaunch& launch : program.launches) CONVJIT_RETURN_IF_ERROR(check_launch(launch));
  program.body = out.take();
  return program;
}

std::string nvrtc_translation_unit(const CudaProgram& program) {
  std::string tu(nvrtc_prelude());
  tu += "\n";
  tu += program.body;
  return tu;
}

std::string launches_to_text(const CudaProgram& program) {
  std::string text = fmt::format("kernel {}\nworkspace {}\ntensors {} {} {} {}\n",
                                 program.kernel_name, program.workspace_bytes, program.x_bytes,
                                 program.w_bytes, program.y_bytes, program.output);
  for (const CudaLaunch& l : program.launches) {
    text += fmt::format("launch {} {} {} {} {} {} {} {}\n", l.symbol, l.grid[0], l.grid[1],
                        l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes);
  }
  return text;
}

Expected<CudaProgram> launches_from_text(std::string_view text) {
  CudaProgram program;
  std::istringstream in{std::string(text)};
  std::string word;
  bool saw_kernel = false;
  while (in >> word) {
    if (word == "kernel") {
      in >> program.kernel_name;
      saw_kernel = true;
    } else if (word == "workspace") {
      in >> program.workspace_bytes;
    } else if (word == "tensors") {
      in >> program.x_bytes >> program.w_bytes >> program.y_bytes >> program.output;
    } else if (word == "launch") {
      CudaLaunch l;
      in >> l.symbol >> l.grid[0] >> l.grid[1] >> l.grid[2] >> l.block[0] >> l.block[1] >>
          l.block[2] >> l.shared_bytes;
      program.launches.push_back(l);
    } else {
      return invalid_argument("stored CUDA launches: unexpected word '" + word + "'");
    }
    if (!in) return invalid_argument("stored CUDA launches: truncated");
  }
  if (!saw_kernel) return invalid_argument("stored CUDA launches: no kernel name");
  return program;
}

}  // namespace convjit::codegen
