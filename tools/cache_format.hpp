// How `convjit cache` prints sizes, ages and times, and reads durations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace convjit::cli {

/// "512 B", "3.5 KiB", "1.2 MiB", "1.05 GiB".
std::string human_bytes(std::uint64_t bytes);

/// An age in milliseconds as "45s", "12m", "5h" or "3d" (negative ages print as 0s).
std::string human_age(std::int64_t ms);

/// A Unix time in milliseconds as local "YYYY-MM-DD HH:MM:SS".
std::string iso_time(std::int64_t unix_ms);

/// "90", "90s", "15m", "2h", "7d" -> milliseconds; UsageError (naming --older-than) for
/// anything else, or a duration too long to count in milliseconds.
std::int64_t parse_duration_ms(std::string_view text);

/// ASCII lower case.
std::string lower(std::string_view s);

}  // namespace convjit::cli
