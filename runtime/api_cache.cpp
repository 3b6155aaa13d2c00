// The C API of convjit/cache.h: the disk cache's listing, totals and purge as JSON, over
// runtime/disk_cache. Every entry point catches everything: no exception crosses the ABI.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "convjit/cache.h"
#include "convjit/types.hpp"
#include "runtime/api_c_error.hpp"
#include "runtime/disk_cache/cache_stats.hpp"
#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/location.hpp"

namespace {

namespace dc = convjit::disk_cache;
using Json = nlohmann::ordered_json;
using convjit::runtime::c_api_fail;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The configured directory, opened without creating it. Empty `cache` with `enabled` false when
// the cache is off; with `enabled` true when it was never written (nothing to list).
struct OpenedCache {
  bool enabled = false;
  std::string directory;
  std::unique_ptr<dc::DiskCache> cache;
};

convjit_status open_configured(OpenedCache* opened) {
  std::optional<std::filesystem::path> dir = dc::configured_cache_dir();
  if (!dir) return CONVJIT_OK;
  opened->enabled = true;
  opened->directory = dir->string();
  dc::OpenOptions options;
  options.create = false;
  options.max_bytes = dc::DiskCache::configured_max_bytes();
  convjit::Expected<std::unique_ptr<dc::DiskCache>> cache = dc::DiskCache::open(*dir, options);
  if (cache.has_value()) {
    opened->cache = std::move(cache.value());
    return CONVJIT_OK;
  }
  if (cache.status().code() == convjit::StatusCode::kNotFound) return CONVJIT_OK;
  return c_api_fail(CONVJIT_UNAVAILABLE, fmt::format("cannot use the kernel cache at {}: {}",
                                                     opened->directory, cache.status().message()));
}

// `convjit cache --op/--dtype/--backend/--isa`, with the same matching rules.
struct Filter {
  std::optional<std::string> op, dtype, backend, isa;
  bool empty() const { return !op && !dtype && !backend && !isa; }
  bool matches(const dc::EntryMeta& m) const {
    if (op) {
      bool any = lower(m.op) == lower(*op);
      for (int k = 0; k <= static_cast<int>(convjit::OpKind::kDepthwiseConv2dNativeBackpropFilter);
           ++k) {
        auto kind = static_cast<convjit::OpKind>(k);
        if (convjit::op_name(kind) == m.op && convjit::op_python_name(kind) == *op) any = true;
      }
      if (!any) return false;
    }
    if (dtype && lower(m.dtype) != lower(*dtype)) return false;
    if (backend && lower(m.backend) != lower(*backend)) return false;
    if (isa && lower(m.isa) != lower(*isa) && lower(m.isa).rfind(lower(*isa) + "+", 0) != 0) {
      return false;
    }
    return true;
  }
};

std::optional<std::string> optional_text(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

Json list_json(const OpenedCache& opened) {
  Json list = Json::array();
  if (!opened.cache) return list;
  dc::Scan scan = opened.cache->scan();
  std::sort(scan.entries.begin(), scan.entries.end(),
            [](const auto& a, const auto& b) { return a.mtime_ms > b.mtime_ms; });
  const std::int64_t now = dc::now_unix_ms();
  for (const dc::ScannedEntry& e : scan.entries) {
    if (!e.meta) {
      list.push_back({{"key_hash", e.key_hash}, {"damaged", e.problem}, {"bytes", e.bytes}});
      continue;
    }
    Json j = Json::parse(dc::meta_to_json(*e.meta));
    j["bytes"] = e.bytes;
    j["age_s"] = (now - e.meta->created_ms) / 1000;
    list.push_back(std::move(j));
  }
  return list;
}

Json stats_json(const OpenedCache& opened) {
  Json j = dc::stats_json(opened.cache ? opened.cache->scan() : dc::Scan{});
  j["enabled"] = opened.enabled;
  j["directory"] = opened.enabled ? Json(opened.directory) : Json(nullptr);
  j["max_bytes"] = dc::DiskCache::configured_max_bytes();
  return j;
}

// Removes what `options` selects, as `convjit cache purge` does.
Json purge_json(const OpenedCache& opened, const convjit_cache_purge_options& options) {
  const Filter filter{optional_text(options.op), optional_text(options.dtype),
                      optional_text(options.backend), optional_text(options.isa)};
  dc::Removed removed;
  std::uint64_t remaining = 0;
  if (opened.cache) {
    dc::DiskCache& cache = *opened.cache;
    const std::int64_t now = dc::now_unix_ms();
    const bool older = options.older_than_seconds > 0;
    if (options.all || older || !filter.empty()) {
      for (const dc::ScannedEntry& e : cache.scan().entries) {
        bool pick = true;
        if (older) pick = now - e.mtime_ms > options.older_than_seconds * 1000;
        if (!filter.empty()) pick = pick && e.meta && filter.matches(*e.meta);
        if (!pick) continue;
        dc::Removed one = cache.remove(e.key_hash);
        removed.entries += one.entries;
        removed.bytes += one.bytes;
      }
    }
    if (options.has_max_bytes) {
      dc::Removed more = cache.evict_to(static_cast<std::uint64_t>(options.max_bytes));
      removed.entries += more.entries;
      removed.bytes += more.bytes;
    }
    remaining = cache.scan().total_bytes;
  }
  return {{"removed_entries", removed.entries},
          {"removed_bytes", removed.bytes},
          {"remaining_bytes", remaining},
          {"directory", opened.enabled ? Json(opened.directory) : Json(nullptr)}};
}

convjit_status hand_out(const Json& json, char** out) {
  if (out == nullptr) return CONVJIT_OK;
  const std::string text = json.dump(-1, ' ', false, Json::error_handler_t::replace);
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) return c_api_fail(CONVJIT_RESOURCE_EXHAUSTED, "out of memory");
  std::memcpy(copy, text.c_str(), text.size() + 1);
  *out = copy;
  return CONVJIT_OK;
}

// Runs `body` (returning a status) with every exception turned into a status code.
template <typename Body>
convjit_status guarded(const char* function, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return c_api_fail(CONVJIT_RESOURCE_EXHAUSTED, fmt::format("{}: out of memory", function));
  } catch (const std::exception& e) {
    return c_api_fail(CONVJIT_INTERNAL, fmt::format("internal error in convjit (please report): "
                                                    "{}: {}",
                                                    function, e.what()));
  } catch (...) {
    return c_api_fail(CONVJIT_INTERNAL,
                      fmt::format("internal error in convjit (please report): {}", function));
  }
}

}  // namespace

extern "C" {

convjit_status convjit_cache_list_json(char** json) {
  if (json == nullptr)
    return c_api_fail(CONVJIT_INVALID_ARGUMENT, "convjit_cache_list_json: json is NULL");
  *json = nullptr;
  return guarded("convjit_cache_list_json", [&] {
    OpenedCache opened;
    if (convjit_status st = open_configured(&opened); st != CONVJIT_OK) return st;
    return hand_out(list_json(opened), json);
  });
}

convjit_status convjit_cache_stats_json(char** json) {
  if (json == nullptr)
    return c_api_fail(CONVJIT_INVALID_ARGUMENT, "convjit_cache_stats_json: json is NULL");
  *json = nullptr;
  return guarded("convjit_cache_stats_json", [&] {
    OpenedCache opened;
    if (convjit_status st = open_configured(&opened); st != CONVJIT_OK) return st;
    return hand_out(stats_json(opened), json);
  });
}

convjit_status convjit_cache_purge(const convjit_cache_purge_options* options, char** json) {
  if (json != nullptr) *json = nullptr;
  if (options == nullptr)
    return c_api_fail(CONVJIT_INVALID_ARGUMENT, "convjit_cache_purge: options is NULL");
  const bool filtered = optional_text(options->op) || optional_text(options->dtype) ||
                        optional_text(options->backend) || optional_text(options->isa);
  if (!options->all && options->older_than_seconds <= 0 && !options->has_max_bytes && !filtered) {
    return c_api_fail(CONVJIT_INVALID_ARGUMENT,
                      "purge needs all, older_than (seconds > 0), max_bytes or a filter (op, "
                      "dtype, backend, isa)");
  }
  if (options->has_max_bytes && options->max_bytes < 0) {
    return c_api_fail(CONVJIT_INVALID_ARGUMENT,
                      fmt::format("purge: max_bytes must be >= 0, but got {}", options->max_bytes));
  }
  return guarded("convjit_cache_purge", [&] {
    OpenedCache opened;
    if (convjit_status st = open_configured(&opened); st != CONVJIT_OK) return st;
    return hand_out(purge_json(opened, *options), json);
  });
}

void convjit_free_string(char* text) { std::free(text); }

}  // extern "C"
