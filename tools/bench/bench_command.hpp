// `convjit bench`: the benchmark shape suite against oneDNN (built when oneDNN is found).
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace convjit::bench {

inline constexpr std::string_view kBenchSummary =
    "benchmark the shape suite against oneDNN, or on a GPU against cuDNN (--device cuda)";

/// Runs the suite; `args` are the words after "bench". Returns the exit code: 0 every result
/// matched oneDNN's, 1 a mismatch or failure, 2 usage error.
int bench_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

}  // namespace convjit::bench
