// `convjit bench` flags: parsed strictly (an unknown flag, a malformed number or list, an
// unknown dtype, format or shape name is a usage error, exit status 2), so that a typo never
// turns into a silently different benchmark.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convjit/types.hpp"
#include "tools/bench/bench_shapes.hpp"

namespace convjit::bench {

enum class OutputFormat { kTable, kCsv, kJson };

struct BenchOptions {
  /// The shapes file (required: the suites live outside the repository, e.g.
  /// ../shared/bench/shapes.txt and networks.txt beside a checkout).
  std::string shapes_path;
  std::vector<DType> dtypes{DType::kFloat32, DType::kBFloat16};
  std::vector<int> threads{1, 2};
  /// Shape names to run (all when empty); checked against the file by select_shapes().
  std::vector<std::string> only;
  double min_time_ms = 200;
  OutputFormat format = OutputFormat::kTable;
  /// Also write the table as Markdown to this file.
  std::string markdown_path;
  /// Peer libraries to load besides the ones installed beside the executable.
  std::vector<std::string> peer_libs;
  /// No peers at all (convjit alone, checked against its naive reference).
  bool no_peers = false;
  bool help = false;
  /// "avx2" when CONVJIT_ISA caps convjit at AVX2 (the peers are capped alike); set by
  /// bench_command from the environment, not a flag.
  std::string isa_cap;
};

/// Parses the words after "bench". Throws cli::UsageError on any mistake.
BenchOptions parse_bench_options(std::span<const std::string_view> args);

/// The flags and their help, for `convjit bench --help`.
std::string bench_usage();

/// The dtype named as `convjit run --dtype` names it: half, bfloat16, float32, float64 (also
/// float16, float, double and the short f16, bf16, f32, f64). Throws cli::UsageError otherwise.
DType parse_dtype_name(std::string_view name);
/// The short name the benchmark prints: f16, bf16, f32, f64.
std::string_view short_dtype_name(DType dtype);

/// The shapes `only` names, in the file's order (all of them when `only` is empty). Throws
/// cli::UsageError naming any name the file does not have, and the names it does have.
std::vector<BenchShape> select_shapes(const std::vector<BenchShape>& shapes,
                                      const std::vector<std::string>& only);

}  // namespace convjit::bench
