// What `convjit cache stats` and convjit_cache_stats_json report about a scan of the disk
// cache: entries, bytes, hits, misses and compile-time percentiles, in all and per backend
// target and per op and dtype.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/disk_cache/disk_cache.hpp"

namespace convjit::disk_cache {

/// {entries, bytes, hits, misses, compile_ms_total, compile_ms_p50/p90/p99/max,
///  bytes_on_disk, damaged_metadata, by_backend: {"<backend> <isa>": {...}},
///  by_op: {"<op> <dtype>": {...}}}; the caller adds where the cache is and its limit.
nlohmann::ordered_json stats_json(const Scan& scan);

}  // namespace convjit::disk_cache
