// `convjit compile`: compiles one descriptor for a named target without running it (no GPU
// needed for a CUDA architecture) and reports what the compile produced.
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace convjit::cli {

inline constexpr std::string_view kCompileSummary =
    "compile one op for a named target (sm_80, sm_90a, avx2, ...) and report its kernel";

/// Runs `convjit compile` with the words after "compile". Exit status: 0 ok, 1 the op or the
/// compile failed, 2 the command line was wrong. Never throws.
int compile_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

}  // namespace convjit::cli
