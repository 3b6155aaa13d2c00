// The x86 JIT backend: scheduled LoopNests to AVX-512 or AVX2 machine code through Xbyak.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "codegen/backend.hpp"
#include "codegen/cpu/cpu_info.hpp"

namespace convjit::codegen {

/// The backend's registry name.
inline constexpr std::string_view kX86BackendName = "x86";

/// Artifact names of stored x86 code: the machine code and its layout (entry points, parallel
/// splits, scratch slots, name).
inline constexpr const char* kCodeArtifactName = "code";
inline constexpr const char* kLoadArtifactName = "load";

/// A Backend named "x86" generating code for `target` (Isa::kAvx512 or Isa::kAvx2; on a
/// generic target plan() refuses every problem).
std::unique_ptr<Backend> make_x86_backend(const cpu::CpuInfo& target);

namespace x86 {

/// Whether the emitter can generate `nest` for `target`; if not, `why_not` says why.
bool can_emit(const ir::LoopNest& nest, const cpu::CpuInfo& target, std::string* why_not);
/// Machine code for a scheduled nest (Unimplemented when can_emit() refuses it).
Expected<std::unique_ptr<CompiledCode>> emit_nest(const ir::LoopNest& nest,
                                                  const cpu::CpuInfo& target);
/// Maps code an earlier emit_nest() generated for `target`, with its layout text.
Expected<std::unique_ptr<CompiledCode>> load_code(std::span<const std::uint8_t> code,
                                                  std::string_view load_info,
                                                  const cpu::CpuInfo& target);

}  // namespace x86

}  // namespace convjit::codegen
