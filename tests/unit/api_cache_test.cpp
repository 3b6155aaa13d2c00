// convjit/cache.h: the disk cache's listing, totals and purge as JSON, through the C ABI.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "convjit/cache.h"
#include "runtime/disk_cache/disk_cache.hpp"

namespace convjit {
namespace {

namespace fs = std::filesystem;
namespace dc = convjit::disk_cache;
using Json = nlohmann::json;

class CacheApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "convjit-cache-api-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ / "cache";
    ::setenv("CONVJIT_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::setenv("CONVJIT_CACHE_DIR", "off", 1);
    fs::remove_all(root_);
  }

  void store(const std::string& key, const std::string& op, const std::string& dtype) {
    dc::OpenOptions options;
    auto cache = dc::DiskCache::open(dir_, options);
    ASSERT_TRUE(cache.has_value()) << cache.status().message();
    dc::Entry entry;
    entry.meta.key = key;
    entry.meta.descriptor = op + " dtype=" + dtype + " " + key;
    entry.meta.op = op;
    entry.meta.dtype = dtype;
    entry.meta.backend = "x86";
    entry.meta.isa = "avx2+f16c";
    entry.meta.kernel_name = "k_" + key;
    entry.meta.compile_ms = 2.0;
    entry.artifacts[dc::kCodeArtifact] = std::vector<std::uint8_t>(32, 0xc3);
    ASSERT_TRUE(cache.value()->store(entry).is_ok());
  }

  static Json call(convjit_status (*fn)(char**)) {
    char* text = nullptr;
    convjit_status status = fn(&text);
    EXPECT_EQ(status, CONVJIT_OK) << convjit_last_error();
    if (text == nullptr) return Json();
    Json json = Json::parse(text);
    convjit_free_string(text);
    return json;
  }

  fs::path root_, dir_;
};

TEST_F(CacheApiTest, MissingDirectoryListsNothingAndIsNotCreated) {
  EXPECT_EQ(call(convjit_cache_list_json), Json::array());
  Json stats = call(convjit_cache_stats_json);
  EXPECT_EQ(stats["enabled"], true);
  EXPECT_EQ(stats["directory"], dir_.string());
  EXPECT_EQ(stats["entries"], 0);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(CacheApiTest, ListsStatsAndPurgesEntries) {
  store("alpha", "Conv2DBackpropInput", "float32");
  store("beta", "Conv2DBackpropFilter", "bfloat16");
  Json list = call(convjit_cache_list_json);
  ASSERT_EQ(list.size(), 2u);
  for (const Json& entry : list) {
    EXPECT_EQ(entry["key_hash"].get<std::string>().size(), 32u);
    EXPECT_GT(entry["bytes"].get<std::uint64_t>(), 32u);
    EXPECT_EQ(entry["backend"], "x86");
  }
  Json stats = call(convjit_cache_stats_json);
  EXPECT_EQ(stats["entries"], 2);
  EXPECT_EQ(stats["misses"], 2);
  EXPECT_DOUBLE_EQ(stats["compile_ms_total"].get<double>(), 4.0);
  EXPECT_EQ(stats["by_op"]["Conv2DBackpropFilter bfloat16"]["entries"], 1);
  EXPECT_EQ(stats["by_backend"]["x86 avx2+f16c"]["entries"], 2);

  // A filter narrows the purge to the matching entry (Python op names match too).
  convjit_cache_purge_options options{};
  options.op = "conv2d_backprop_filter";
  char* text = nullptr;
  ASSERT_EQ(convjit_cache_purge(&options, &text), CONVJIT_OK) << convjit_last_error();
  Json purged = Json::parse(text);
  convjit_free_string(text);
  EXPECT_EQ(purged["removed_entries"], 1);
  list = call(convjit_cache_list_json);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["op"], "Conv2DBackpropInput");

  options = {};
  options.all = 1;
  ASSERT_EQ(convjit_cache_purge(&options, nullptr), CONVJIT_OK) << convjit_last_error();
  EXPECT_EQ(call(convjit_cache_list_json), Json::array());
}

TEST_F(CacheApiTest, MaxBytesEvictsDownToTheLimit) {
  store("alpha", "Conv2DBackpropInput", "float32");
  store("beta", "Conv2DBackpropInput", "float64");
  convjit_cache_purge_options options{};
  options.has_max_bytes = 1;
  options.max_bytes = 0;
  char* text = nullptr;
  ASSERT_EQ(convjit_cache_purge(&options, &text), CONVJIT_OK) << convjit_last_error();
  Json purged = Json::parse(text);
  convjit_free_string(text);
  EXPECT_EQ(purged["removed_entries"], 2);
  EXPECT_EQ(purged["remaining_bytes"], 0);
}

TEST_F(CacheApiTest, RefusesAPurgeThatSelectsNothingAndNullArguments) {
  convjit_cache_purge_options options{};
  EXPECT_EQ(convjit_cache_purge(&options, nullptr), CONVJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(convjit_last_error()).find("purge needs"), std::string::npos);
  options.has_max_bytes = 1;
  options.max_bytes = -1;
  EXPECT_EQ(convjit_cache_purge(&options, nullptr), CONVJIT_INVALID_ARGUMENT);
  EXPECT_EQ(convjit_cache_purge(nullptr, nullptr), CONVJIT_INVALID_ARGUMENT);
  EXPECT_EQ(convjit_cache_list_json(nullptr), CONVJIT_INVALID_ARGUMENT);
  EXPECT_EQ(convjit_cache_stats_json(nullptr), CONVJIT_INVALID_ARGUMENT);
  convjit_free_string(nullptr);
}

TEST_F(CacheApiTest, DisabledCacheIsEmpty) {
  ::setenv("CONVJIT_CACHE_DIR", "off", 1);
  EXPECT_EQ(call(convjit_cache_list_json), Json::array());
  Json stats = call(convjit_cache_stats_json);
  EXPECT_EQ(stats["enabled"], false);
  EXPECT_TRUE(stats["directory"].is_null());
  convjit_cache_purge_options options{};
  options.all = 1;
  char* text = nullptr;
  ASSERT_EQ(convjit_cache_purge(&options, &text), CONVJIT_OK);
  EXPECT_EQ(Json::parse(text)["removed_entries"], 0);
  convjit_free_string(text);
}

TEST(CacheApiVersionTest, VersionMatchesTheHeaders) {
  EXPECT_STREQ(convjit_version(), CONVJIT_VERSION_STRING);
  EXPECT_EQ(CONVJIT_VERSION_NUMBER,
            CONVJIT_VERSION_MAJOR * 10000 + CONVJIT_VERSION_MINOR * 100 + CONVJIT_VERSION_PATCH);
}

}  // namespace
}  // namespace convjit
