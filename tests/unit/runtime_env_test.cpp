// Parsing of the CONVJIT_* environment variables: good values, defaults, and one warning per
// bad value.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/env.hpp"

namespace convjit::runtime {
namespace {

EnvConfig parse(const std::map<std::string, std::string>& vars, std::vector<std::string>* warnings) {
  return parse_env(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      warnings);
}

TEST(RuntimeEnv, DefaultsWhenUnset) {
  std::vector<std::string> warnings;
  const EnvConfig config = parse({}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.verbose, 0);
  EXPECT_EQ(config.cache_capacity, kDefaultCacheCapacity);
  EXPECT_EQ(config.num_threads, hardware_threads());
  EXPECT_EQ(config.isa_cap, cpu::Isa::kAvx512);
  EXPECT_EQ(config.backend, "");
  EXPECT_FALSE(config.always_compile);
}

TEST(RuntimeEnv, GoodValues) {
  std::vector<std::string> warnings;
  const EnvConfig config = parse({{"CONVJIT_VERBOSE", "2"},
                                  {"CONVJIT_CACHE_CAPACITY", "16"},
                                  {"CONVJIT_NUM_THREADS", " 3 "},
                                  {"CONVJIT_ISA", "AVX2"},
                                  {"CONVJIT_BACKEND", "interpreter"},
                                  {"CONVJIT_ALWAYS_COMPILE", "1"}},
                                 &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.verbose, 2);
  EXPECT_EQ(config.cache_capacity, 16u);
  EXPECT_EQ(config.num_threads, 3);
  EXPECT_EQ(config.isa_cap, cpu::Isa::kAvx2);
  EXPECT_EQ(config.backend, "interpreter");
  EXPECT_TRUE(config.always_compile);
  EXPECT_EQ(parse({{"CONVJIT_ISA", "generic"}}, &warnings).isa_cap, cpu::Isa::kGeneric);
}

TEST(RuntimeEnv, BadValuesWarnOnceEachAndKeepDefaults) {
  std::vector<std::string> warnings;
  const EnvConfig config = parse({{"CONVJIT_VERBOSE", "loud"},
                                  {"CONVJIT_CACHE_CAPACITY", "-4"},
                                  {"CONVJIT_NUM_THREADS", "0"},
                                  {"CONVJIT_ISA", "sse9"},
                                  {"CONVJIT_ALWAYS_COMPILE", "sometimes"}},
                                 &warnings);
  ASSERT_EQ(warnings.size(), 5u);
  EXPECT_NE(warnings[0].find("CONVJIT_VERBOSE='loud'"), std::string::npos) << warnings[0];
  EXPECT_EQ(config.verbose, 0);
  EXPECT_EQ(config.cache_capacity, kDefaultCacheCapacity);
  EXPECT_EQ(config.num_threads, hardware_threads());
  EXPECT_EQ(config.isa_cap, cpu::Isa::kAvx512);
  EXPECT_FALSE(config.always_compile);
  warnings.clear();
  parse({{"CONVJIT_NUM_THREADS", "12abc"}, {"CONVJIT_CACHE_CAPACITY", "99999999999999999999"}},
        &warnings);
  EXPECT_EQ(warnings.size(), 2u);
}

TEST(RuntimeEnv, CacheBytesTakesSizesWithSuffixes) {
  std::vector<std::string> warnings;
  EXPECT_EQ(parse({}, &warnings).cache_bytes, kDefaultCacheBytes);
  const std::pair<const char*, std::size_t> good[] = {
      {"0", 0}, {"1048576", 1048576}, {"64k", 64u << 10}, {" 256M ", 256u << 20}, {"2G", 2ull << 30}};
  for (const auto& [text, bytes] : good) {
    EXPECT_EQ(parse({{"CONVJIT_CACHE_BYTES", text}}, &warnings).cache_bytes, bytes) << text;
  }
  EXPECT_TRUE(warnings.empty());
  for (const char* bad : {"", "-1", "12T", "M", "1.5G", "99999999999999999999", "17179869184G"}) {
    warnings.clear();
    EXPECT_EQ(parse({{"CONVJIT_CACHE_BYTES", bad}}, &warnings).cache_bytes, kDefaultCacheBytes)
        << bad;
    ASSERT_EQ(warnings.size(), 1u) << bad;
    EXPECT_NE(warnings[0].find("CONVJIT_CACHE_BYTES"), std::string::npos) << warnings[0];
  }
}

}  // namespace
}  // namespace convjit::runtime
