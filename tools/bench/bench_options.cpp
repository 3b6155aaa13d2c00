#include "tools/bench/bench_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <set>

#include "tools/cli_args.hpp"

namespace convjit::bench {
namespace {

using cli::UsageError;

constexpr std::array<cli::FlagSpec, 11> kBenchFlags{{
    {"shapes", "FILE", "the shapes file to run (required), e.g. ../shared/bench/shapes.txt"},
    {"only", "NAME,..", "run only these shapes of the file (an unknown name is an error)"},
    {"dtype", "LIST",
     "f32, bf16, f16, f64 (or as `convjit run` names them: float32, ...; "
     "default f32,bf16)"},
    {"dtypes", "LIST", "the same as --dtype"},
    {"threads", "LIST", "thread counts, e.g. 1,2 (default 1,2)"},
    {"format", "FMT", "table (default), csv or json (one record per implementation and case)"},
    {"min-time-ms", "MS", "time each implementation at least this long per case (default 200)"},
    {"markdown", "FILE", "also write the table as Markdown to FILE"},
    {"peer-lib", "PATH,..", "load these peer libraries as well as the ones beside the executable"},
    {"no-peers", "", "time convjit alone, checked against its naive reference"},
    {"help", "", "show this help"},
}};

std::vector<std::string> split_names(std::string_view text, std::string_view flag) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.empty()) throw UsageError(fmt::format("--{}: '{}' has an empty item", flag, text));
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

DType parse_dtype_name(std::string_view name) {
  if (name == "f16" || name == "half" || name == "float16") return DType::kHalf;
  if (name == "bf16" || name == "bfloat16") return DType::kBFloat16;
  if (name == "f32" || name == "float32" || name == "float") return DType::kFloat32;
  if (name == "f64" || name == "float64" || name == "double") return DType::kFloat64;
  throw UsageError(fmt::format("--dtype: '{}' is not a dtype (f32, bf16, f16 or f64)", name));
}

std::string_view short_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
  }
  return "?";
}

std::string bench_usage() {
  return fmt::format(
      "usage: convjit bench --shapes FILE [--only NAME,..] [--dtype f32,bf16] [--threads 1,2]\n"
      "                     [--format table|csv|json] [--min-time-ms MS] [--markdown FILE]\n"
      "                     [--peer-lib PATH,..] [--no-peers]\n"
      "\n"
      "Runs every shape of the file and each of its gradient ops (conv: data and filter\n"
      "gradients; dw: data gradient): convjit and each peer on the same NHWC/HWIO tensors,\n"
      "timed alternately in this process, median GFLOP/s (nominal FLOPs, padding taps\n"
      "included). Peers are the oneDNN builds whose peer libraries lie beside this executable\n"
      "(convjit_bench_onednn*.so) or are named by --peer-lib; each is measured on TensorFlow's\n"
      "layouts with its reorders counted ('tf') and on its preferred layouts ('best').\n"
      "Each convjit result is checked against the first peer's, or against convjit's naive\n"
      "reference where no peer runs the case. Progress goes to stderr, results to stdout.\n"
      "With CONVJIT_ISA=avx2 the oneDNN peers are capped at AVX2 as well.\n"
      "\n"
      "flags:\n{}\n"
      "exit status: 0 every result matched; 1 a mismatch or a failed case; 2 a usage error.\n",
      cli::format_flag_help(kBenchFlags));
}

BenchOptions parse_bench_options(std::span<const std::string_view> args) {
  const cli::ParsedFlags flags = cli::parse_flags(args, kBenchFlags);
  BenchOptions o;
  if (flags.has("help")) {
    o.help = true;
    return o;
  }
  if (flags.has("dtype") && flags.has("dtypes")) {
    throw UsageError("give --dtype or --dtypes (the same flag), not both");
  }
  const std::optional<std::string> shapes = flags.get("shapes");
  if (!shapes || shapes->empty()) {
    throw UsageError(
        "--shapes FILE is required (the suites are shapes.txt and networks.txt in "
        "../shared/bench/ beside a checkout)");
  }
  o.shapes_path = *shapes;
  if (auto v = flags.get("only")) o.only = split_names(*v, "only");
  if (auto v = flags.has("dtype") ? flags.get("dtype") : flags.get("dtypes")) {
    o.dtypes.clear();
    for (const std::string& name : split_names(*v, "dtype")) {
      const DType d = parse_dtype_name(name);
      if (std::find(o.dtypes.begin(), o.dtypes.end(), d) == o.dtypes.end()) o.dtypes.push_back(d);
    }
  }
  if (auto v = flags.get("threads")) {
    o.threads.clear();
    const std::vector<std::int64_t> counts = cli::parse_int_list(*v, "threads");
    if (counts.empty()) throw UsageError("--threads: give at least one thread count");
    for (std::int64_t t : counts) {
      if (t < 1 || t > 4096) {
        throw UsageError(fmt::format("--threads: {} is not a thread count (1 to 4096)", t));
      }
      o.threads.push_back(static_cast<int>(t));
    }
  }
  if (auto v = flags.get("format")) {
    if (*v == "table") {
      o.format = OutputFormat::kTable;
    } else if (*v == "csv") {
      o.format = OutputFormat::kCsv;
    } else if (*v == "json") {
      o.format = OutputFormat::kJson;
    } else {
      throw UsageError(fmt::format("--format: '{}' is not table, csv or json", *v));
    }
  }
  if (auto v = flags.get("min-time-ms")) {
    o.min_time_ms = cli::parse_double(*v, "min-time-ms");
    if (o.min_time_ms <= 0) {
      throw UsageError(fmt::format("--min-time-ms: {} is not a positive time", *v));
    }
  }
  if (auto v = flags.get("markdown")) o.markdown_path = *v;
  if (auto v = flags.get("peer-lib")) o.peer_libs = split_names(*v, "peer-lib");
  o.no_peers = flags.has("no-peers");
  if (o.no_peers && !o.peer_libs.empty())
    throw UsageError("give --no-peers or --peer-lib, not both");
  return o;
}

std::vector<BenchShape> select_shapes(const std::vector<BenchShape>& shapes,
                                      const std::vector<std::string>& only) {
  if (only.empty()) return shapes;
  std::set<std::string> known;
  for (const BenchShape& s : shapes) known.insert(s.name);
  std::vector<std::string> unknown;
  for (const std::string& name : only) {
    if (!known.count(name)) unknown.push_back(name);
  }
  if (!unknown.empty()) {
    std::vector<std::string> names;
    for (const BenchShape& s : shapes) names.push_back(s.name);
    throw UsageError(fmt::format("--only: no shape named {} in the file (it has: {})",
                                 fmt::join(unknown, ", "), fmt::join(names, ", ")));
  }
  std::vector<BenchShape> picked;
  for (const BenchShape& s : shapes) {
    if (std::find(only.begin(), only.end(), s.name) != only.end()) picked.push_back(s);
  }
  return picked;
}

}  // namespace convjit::bench
