#include "runtime/env.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include <fmt/format.h>

namespace convjit::runtime {
namespace {

// Upper bounds that keep a typo (an extra zero) from asking for absurd resources.
constexpr long long kMaxThreads = 4096;
constexpr long long kMaxCacheCapacity = 1 << 24;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view text, long long lo, long long hi, long long* out) {
  text = trim(text);
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return false;
  if (value < lo || value > hi) return false;
  *out = value;
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool parse_bool(std::string_view text, bool* out) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) {
    *out = false;
    return true;
  }
  return false;
}

}  // namespace

bool parse_byte_size(std::string_view text, std::size_t* out) {
  text = trim(text);
  if (text.empty()) return false;
  unsigned shift = 0;
  switch (text.back()) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift != 0) text.remove_suffix(1);
  unsigned long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return false;
  if (shift != 0 && value > (static_cast<unsigned long long>(-1) >> shift)) return false;
  value <<= shift;
  if (value > static_cast<unsigned long long>(static_cast<std::size_t>(-1))) return false;
  *out = static_cast<std::size_t>(value);
  return true;
}

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

EnvConfig parse_env(const EnvGetter& get, std::vector<std::string>* warnings) {
  EnvConfig config;
  config.num_threads = hardware_threads();
  auto warn = [&](const char* name, const char* value, std::string_view expected,
                  std::string_view fallback) {
    if (warnings != nullptr) {
      warnings->push_back(fmt::format("convjit: ignoring {}='{}' (expected {}); using {}", name,
                                      value, expected, fallback));
    }
  };

  if (const char* v = get("CONVJIT_VERBOSE")) {
    long long level = 0;
    if (parse_int(v, 0, 2, &level)) {
      config.verbose = static_cast<int>(level);
    } else if (!trim(v).empty()) {
      warn("CONVJIT_VERBOSE", v, "0, 1 or 2", "0");
    }
  }
  if (const char* v = get("CONVJIT_CACHE_CAPACITY")) {
    long long capacity = 0;
    if (parse_int(v, 0, kMaxCacheCapacity, &capacity)) {
      config.cache_capacity = static_cast<std::size_t>(capacity);
    } else {
      warn("CONVJIT_CACHE_CAPACITY", v, fmt::format("an integer in [0, {}]", kMaxCacheCapacity),
           std::to_string(kDefaultCacheCapacity));
    }
  }
  if (const char* v = get("CONVJIT_CACHE_BYTES")) {
    std::size_t bytes = 0;
    if (parse_byte_size(v, &bytes)) {
      config.cache_bytes = bytes;
    } else {
      warn("CONVJIT_CACHE_BYTES", v, "a size in bytes, e.g. 268435456, 256M or 1G",
           fmt::format("{}M", kDefaultCacheBytes >> 20));
    }
  }
  if (const char* v = get("CONVJIT_NUM_THREADS")) {
    long long threads = 0;
    if (parse_int(v, 1, kMaxThreads, &threads)) {
      config.num_threads = static_cast<int>(threads);
    } else {
      warn("CONVJIT_NUM_THREADS", v, fmt::format("an integer in [1, {}]", kMaxThreads),
           fmt::format("{} (all cores)", config.num_threads));
    }
  }
  if (const char* v = get("CONVJIT_ISA")) {
    const std::string isa = lower(trim(v));
    if (isa == "avx512" || isa == "avx512f" || isa == "avx512_core") {
      config.isa_cap = cpu::Isa::kAvx512;
    } else if (isa == "avx2") {
      config.isa_cap = cpu::Isa::kAvx2;
    } else if (isa == "generic" || isa == "scalar" || isa == "none") {
      config.isa_cap = cpu::Isa::kGeneric;
    } else if (!isa.empty()) {
      warn("CONVJIT_ISA", v, "avx512, avx2 or generic", "the host's best");
    }
  }
  if (const char* v = get("CONVJIT_BACKEND")) {
    // Checked against the registry at compile time, where an unknown name is an error.
    config.backend = std::string(trim(v));
  }
  if (const char* v = get("CONVJIT_CUDA_INTERPRET")) {
    if (!parse_bool(v, &config.cuda_interpret)) warn("CONVJIT_CUDA_INTERPRET", v, "0 or 1", "0");
  }
  if (const char* v = get("CONVJIT_ALWAYS_COMPILE")) {
    if (!parse_bool(v, &config.always_compile)) warn("CONVJIT_ALWAYS_COMPILE", v, "0 or 1", "0");
  }
  return config;
}

const EnvConfig& env() {
  static const EnvConfig config = [] {
    std::vector<std::string> warnings;
    EnvConfig parsed = parse_env([](const char* name) { return std::getenv(name); }, &warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "%s\n", w.c_str());
    return parsed;
  }();
  return config;
}

}  // namespace convjit::runtime
