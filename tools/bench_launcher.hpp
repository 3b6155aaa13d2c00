// `convjit bench`: runs convjit-bench, the benchmark against oneDNN, which is a program of its
// own so that the library and this binary never need oneDNN.
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace convjit::cli {

inline constexpr std::string_view kBenchSummary =
    "benchmark the shape suite against oneDNN, or cuDNN with --device cuda (runs convjit-bench)";

/// Replaces this process with convjit-bench (found beside this executable, else on PATH) and
/// the same arguments. Returns only when it cannot: exit status 1 with the reason on `err`.
int bench_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

}  // namespace convjit::cli
