// The CUDA source generator's output: one translation unit per descriptor (the kernels of its
// plan) and the launches that run them, in order, on one stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_plan.hpp"
#include "support/status.hpp"

namespace convjit::codegen {

/// One kernel launch of a program.
struct CudaLaunch {
  /// The extern "C" kernel's name in the source.
  std::string symbol;
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::array<std::uint32_t, 3> block{1, 1, 1};
  /// Static shared memory the kernel declares (for reports; nothing is passed at launch).
  int shared_bytes = 0;
};

struct CudaProgram {
  /// The plan's kernel name.
  std::string kernel_name;
  /// The generated part of the translation unit: everything after the portable layer's
  /// definitions, with no #include. NVRTC compiles nvrtc_prelude() + body; the interpret
  /// mode compiles the host prelude + the same body.
  std::string body;
  /// Run in order on one stream; an empty list computes nothing (an empty output).
  std::vector<CudaLaunch> launches;
  std::size_t workspace_bytes = 0;
  /// Bytes of the x, w and y tensors, and which of them the program writes ('x', 'w', 'y'):
  /// what an executor checks pointers and accesses against.
  std::int64_t x_bytes = 0, w_bytes = 0, y_bytes = 0;
  char output = 'y';
};

/// The program for `plan`. Internal error when the plan asks for something the generators do
/// not emit (a bug in the plan model).
Expected<CudaProgram> generate_cuda_program(const CudaPlan& plan);

/// The whole NVRTC translation unit: the prelude and the body.
std::string nvrtc_translation_unit(const CudaProgram& program);

/// The CudaProgram as text and back, for the disk cache: the launches and workspace size (the
/// body is stored as its own artifact).
std::string launches_to_text(const CudaProgram& program);
Expected<CudaProgram> launches_from_text(std::string_view text);

}  // namespace convjit::codegen
