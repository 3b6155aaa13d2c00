#include "runtime/disk_cache/cache_stats.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace convjit::disk_cache {
namespace {

using Json = nlohmann::ordered_json;

// Linear interpolation between the two nearest ranks.
double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(rank);
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

struct Tally {
  std::size_t entries = 0;
  std::uint64_t bytes = 0, hits = 0, misses = 0;
  std::vector<double> compile_ms;

  void add(const ScannedEntry& e) {
    ++entries;
    bytes += e.bytes;
    hits += e.meta->hits;
    misses += e.meta->compiles;
    compile_ms.push_back(e.meta->compile_ms);
  }

  Json json() const {
    double total = 0;
    for (double v : compile_ms) total += v;
    return {{"entries", entries},
            {"bytes", bytes},
            {"hits", hits},
            {"misses", misses},
            {"compile_ms_total", total},
            {"compile_ms_p50", percentile(compile_ms, 50)},
            {"compile_ms_p90", percentile(compile_ms, 90)},
            {"compile_ms_p99", percentile(compile_ms, 99)},
            {"compile_ms_max",
             compile_ms.empty() ? 0 : *std::max_element(compile_ms.begin(), compile_ms.end())}};
  }
};

}  // namespace

nlohmann::ordered_json stats_json(const Scan& scan) {
  Tally all;
  std::map<std::string, Tally> by_backend, by_op;
  std::size_t damaged = 0;
  for (const ScannedEntry& e : scan.entries) {
    if (!e.meta) {
      ++damaged;
      continue;
    }
    all.add(e);
    by_backend[e.meta->backend + " " + e.meta->isa].add(e);
    by_op[e.meta->op + " " + e.meta->dtype].add(e);
  }
  Json j = all.json();
  j["bytes_on_disk"] = scan.total_bytes;
  j["damaged_metadata"] = damaged;
  j["by_backend"] = Json::object();
  j["by_op"] = Json::object();
  for (const auto& [name, t] : by_backend) j["by_backend"][name] = t.json();
  for (const auto& [name, t] : by_op) j["by_op"][name] = t.json();
  return j;
}

}  // namespace convjit::disk_cache
