#include "tools/cache_format.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>

#include <fmt/format.h>

#include "tools/cli_args.hpp"

namespace convjit::cli {

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < (1u << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

std::string human_age(std::int64_t ms) {
  std::int64_t s = std::max<std::int64_t>(ms, 0) / 1000;
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  if (s < 172800) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

std::string iso_time(std::int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::int64_t parse_duration_ms(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw UsageError(fmt::format("--older-than: '{}' is not a duration (e.g. 7d, 12h, 30m, 90s)", text));
  std::int64_t value = parse_int(text.substr(0, digits), "--older-than");
  std::string_view unit = text.substr(digits);
  std::int64_t scale = unit.empty() || unit == "s" ? 1000
                       : unit == "m"               ? 60'000
                       : unit == "h"               ? 3'600'000
                       : unit == "d"               ? 86'400'000
                                                   : -1;
  if (scale < 0) throw UsageError(fmt::format("--older-than: unknown unit '{}' (s, m, h, d)", unit));
  if (value > std::numeric_limits<std::int64_t>::max() / scale) {
    throw UsageError(fmt::format("--older-than: '{}' is too long a duration", text));
  }
  return value * scale;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace convjit::cli
