// The disk cache's entries: round trips, integrity checks that drop damaged entries, eviction,
// hit counts and write failures.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "frontend/hash.hpp"
#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/file_io.hpp"

namespace convjit::disk_cache {
namespace {

namespace fs = std::filesystem;

class DiskCacheTest : public ::testing::Test {
 public:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "convjit-disk-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ / "cache";
  }
  void TearDown() override {
    set_write_fault_for_testing(0);
    set_remove_fault_for_testing(0);
    set_space_for_testing(0);
    fs::permissions(root_, fs::perms::owner_all);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<DiskCache> open_cache(OpenOptions options = {}) {
    Expected<std::unique_ptr<DiskCache>> cache = DiskCache::open(dir_, options);
    EXPECT_TRUE(cache.has_value()) << (cache ? "" : cache.status().message());
    return cache ? std::move(*cache) : nullptr;
  }

  static Entry make(const std::string& key, std::size_t code_size = 64) {
    Entry entry;
    entry.meta.key = key;
    entry.meta.descriptor = "Conv2DBackpropInput dtype=float32 " + key;
    entry.meta.op = "Conv2DBackpropInput";
    entry.meta.backend = "x86";
    entry.meta.kernel_name = "k_" + key;
    entry.meta.compile_ms = 1.5;
    std::vector<std::uint8_t> code(code_size);
    for (std::size_t i = 0; i < code.size(); ++i) code[i] = static_cast<std::uint8_t>(i * 7 + key.size());
    entry.artifacts[kCodeArtifact] = code;
    std::string ir = "for n in [0, 1) serial\n";
    entry.artifacts[kIrArtifact].assign(ir.begin(), ir.end());
    return entry;
  }

  fs::path artifact_path(const std::string& key, const char* artifact) {
    std::string hash = hash128(key).hex();
    for (const auto& f : fs::directory_iterator(dir_)) {
      std::string name = f.path().filename().string();
      if (name.starts_with(hash + "-") && name.ends_with(std::string(".") + artifact)) return f.path();
    }
    return {};
  }
  fs::path meta_path(const std::string& key) { return dir_ / (hash128(key).hex() + ".json"); }

  fs::path root_;
  fs::path dir_;
};

TEST_F(DiskCacheTest, StoreThenLookupReturnsTheSameBytes) {
  auto cache = open_cache();
  Entry entry = make("alpha");
  ASSERT_TRUE(cache->store(entry).is_ok());
  std::optional<Entry> found = cache->lookup("alpha");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->artifact(kCodeArtifact), entry.artifact(kCodeArtifact));
  EXPECT_EQ(found->artifact(kIrArtifact), entry.artifact(kIrArtifact));
  EXPECT_EQ(found->meta.key, "alpha");
  EXPECT_EQ(found->meta.key_hash, hash128("alpha").hex());
  EXPECT_EQ(found->meta.kernel_name, "k_alpha");
  EXPECT_EQ(found->meta.code_size, 64u);
  EXPECT_EQ(found->meta.library_version, std::string(library_version()));
  EXPECT_EQ(found->meta.compiles, 1u);
  EXPECT_FALSE(cache->lookup("beta").has_value());
}

TEST_F(DiskCacheTest, DirectoryIsCreatedPrivate) {
  auto cache = open_cache();
  auto perms = fs::status(dir_).permissions();
  EXPECT_EQ(perms & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
}

TEST_F(DiskCacheTest, HitsAreCountedThroughTheMetadata) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  for (int i = 0; i < 3; ++i) {
    std::optional<Entry> found = cache->lookup("alpha");
    ASSERT_TRUE(found.has_value());
    cache->record_hit(found->meta);
  }
  std::optional<Entry> found = cache->lookup("alpha");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.hits, 3u);
  EXPECT_GE(found->meta.last_used_ms, found->meta.created_ms);
  // Storing the key again (another process compiled it too) keeps the history.
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  found = cache->lookup("alpha");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->meta.hits, 3u);
  EXPECT_EQ(found->meta.compiles, 2u);
}

// Every kind of damage: the entry is refused, removed with one warning, and a new store works.
void expect_dropped(DiskCache& cache, const std::string& key, const std::string& why) {
  ::testing::internal::CaptureStderr();
  std::optional<Entry> found = cache.lookup(key);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found.has_value());
  EXPECT_NE(err.find("convjit: warning: disk cache entry"), std::string::npos) << err;
  EXPECT_NE(err.find(why), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Removed: the second lookup is a silent miss.
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.lookup(key).has_value());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(cache.store(DiskCacheTest::make(key)).is_ok());
  EXPECT_TRUE(cache.lookup(key).has_value());
}

TEST_F(DiskCacheTest, TruncatedCodeIsDropped) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  fs::resize_file(artifact_path("alpha", kCodeArtifact), 10);
  expect_dropped(*cache, "alpha", "has 10 bytes");
}

TEST_F(DiskCacheTest, FlippedCodeBytesAreDropped) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  fs::path code = artifact_path("alpha", kCodeArtifact);
  std::fstream f(code, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(5);
  f.put(static_cast<char>(0xCC));
  f.close();
  expect_dropped(*cache, "alpha", "fails its checksum");
}

TEST_F(DiskCacheTest, GarbageMetadataIsDropped) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  std::ofstream(meta_path("alpha"), std::ios::trunc) << "\x01\x02 not json {";
  expect_dropped(*cache, "alpha", "unreadable metadata");
}

TEST_F(DiskCacheTest, TruncatedMetadataIsDropped) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  fs::resize_file(meta_path("alpha"), fs::file_size(meta_path("alpha")) / 2);
  expect_dropped(*cache, "alpha", "unreadable metadata");
}

TEST_F(DiskCacheTest, EntryOfAnotherVersionIsDropped) {
  OpenOptions old_version;
  old_version.library_version = "0.0.1-old";
  ASSERT_TRUE(open_cache(old_version)->store(make("alpha")).is_ok());
  auto cache = open_cache();
  expect_dropped(*cache, "alpha", "written by convjit 0.0.1-old");
}

TEST_F(DiskCacheTest, MetadataOfAnotherKeyIsDropped) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  ASSERT_TRUE(cache->store(make("beta")).is_ok());
  // A metadata file copied under another entry's name must not serve that entry.
  fs::copy_file(meta_path("beta"), meta_path("alpha"), fs::copy_options::overwrite_existing);
  expect_dropped(*cache, "alpha", "key does not match");
}

TEST_F(DiskCacheTest, MissingArtifactIsAPlainMiss) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  fs::remove(artifact_path("alpha", kCodeArtifact));
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache->lookup("alpha").has_value());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(DiskCacheTest, FullDiskWarnsOnceAndKeepsReading) {
  auto cache = open_cache();
  // A full disk evicts the least recently used entries to make room for the new one (about
  // twice its size) before it gives up; "alpha", the most recently used, stays.
  for (const char* key : {"old1", "old2", "old3", "old4"}) {
    ASSERT_TRUE(cache->store(make(key)).is_ok());
    fs::last_write_time(meta_path(key), fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  set_write_fault_for_testing(ENOSPC);
  ::testing::internal::CaptureStderr();
  Status first = cache->store(make("beta"));
  Status second = cache->store(make("gamma"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(first.is_ok());
  EXPECT_FALSE(second.is_ok());
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(cache->writable());
  // Nothing half-written is left behind, and existing entries still serve.
  EXPECT_FALSE(cache->lookup("beta").has_value());
  EXPECT_TRUE(cache->lookup("alpha").has_value());
  for (const auto& f : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(is_temp_file_name(f.path().filename().string())) << f.path();
  }
  // It made room once (for "beta"): some old entries went, not all of them; "gamma" found
  // the cache unwritable and evicted nothing more.
  EXPECT_FALSE(cache->lookup("old1").has_value());
  EXPECT_TRUE(cache->lookup("old4").has_value());
}

TEST_F(DiskCacheTest, AFullDirectoryEvictsLeastRecentlyUsedToStoreMore) {
  // The file system (or quota) holds less than the configured limit: every store that finds
  // it full makes room by evicting the least recently used entries, and succeeds.
  OpenOptions options;
  options.max_bytes = 1u << 30;
  auto cache = open_cache(options);
  ASSERT_TRUE(cache->store(make("first", 4096)).is_ok());
  fs::last_write_time(meta_path("first"), fs::file_time_type::clock::now() - std::chrono::hours(1));
  const std::uint64_t one = cache->scan().total_bytes;
  set_space_for_testing(5 * one);
  for (int i = 0; i < 20; ++i) {
    const std::string key = "key" + std::to_string(i);
    ASSERT_TRUE(cache->store(make(key, 4096)).is_ok()) << key;
    fs::last_write_time(meta_path(key), fs::file_time_type::clock::now() -
                                            std::chrono::seconds(100 - i));  // ordered by use
    EXPECT_LE(cache->scan().total_bytes, 5 * one) << key;
  }
  set_space_for_testing(0);
  EXPECT_TRUE(cache->writable());
  EXPECT_FALSE(cache->lookup("first").has_value());
  EXPECT_FALSE(cache->lookup("key0").has_value());
  EXPECT_TRUE(cache->lookup("key19").has_value());
  EXPECT_TRUE(cache->lookup("key18").has_value());
}

TEST_F(DiskCacheTest, RemovalThatFailsIsReportedNotCounted) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  ASSERT_TRUE(cache->store(make("beta")).is_ok());
  set_remove_fault_for_testing(EROFS);
  Removed removed = cache->remove(hash128("alpha").hex());
  EXPECT_EQ(removed.entries, 0u);
  EXPECT_EQ(removed.bytes, 0u);
  EXPECT_EQ(removed.failed, 1u);
  EXPECT_NE(removed.error.find("Read-only file system"), std::string::npos) << removed.error;
  removed = cache->evict_to(0);
  EXPECT_EQ(removed.entries, 0u);
  EXPECT_EQ(removed.failed, 2u);
  set_remove_fault_for_testing(0);
  EXPECT_TRUE(cache->lookup("alpha").has_value());
  EXPECT_TRUE(cache->lookup("beta").has_value());
  removed = cache->evict_to(0);
  EXPECT_EQ(removed.entries, 2u);
  EXPECT_EQ(removed.failed, 0u);
  EXPECT_TRUE(removed.error.empty());
}

// A hit counted late (the background writer) must never bring back the metadata of an entry
// evicted meanwhile: that left metadata without artifacts, which `cache verify` reported as
// damage. Two caches on one directory (as two processes would be), one counting hits for
// entries it saw once, one storing and evicting; every entry left must verify.
TEST_F(DiskCacheTest, LateHitCountsNeverResurrectEvictedEntries) {
  auto counter = open_cache();
  auto evictor = open_cache();
  std::vector<EntryMeta> seen;
  for (int i = 0; i < 8; ++i) {
    const std::string key = "key" + std::to_string(i);
    ASSERT_TRUE(evictor->store(make(key)).is_ok());
    seen.push_back(counter->lookup(key)->meta);
  }
  std::atomic<bool> stop{false};
  std::thread evicting([&] {
    for (int round = 0; round < 100; ++round) {
      evictor->evict_to(0);
      for (int i = 0; i < 8; i += 2) (void)evictor->store(make("key" + std::to_string(i)));
    }
    stop = true;
  });
  // What the background writer runs, on a thread of its own (its queue would only batch it).
  std::thread counting([&] {
    while (!stop) {
      for (const EntryMeta& meta : seen) counter->record_hit(meta);
    }
  });
  evicting.join();
  counting.join();
  // Whatever is left is whole.
  for (const ScannedEntry& e : evictor->scan().entries) {
    Expected<Entry> loaded = evictor->load(e.key_hash, false);
    EXPECT_TRUE(loaded.has_value()) << e.key_hash << ": " << loaded.status().message();
  }
  // The odd keys were evicted in the first round and never stored again.
  for (int i = 1; i < 8; i += 2) {
    EXPECT_FALSE(fs::exists(meta_path("key" + std::to_string(i)))) << i;
  }
}

TEST_F(DiskCacheTest, ReadOnlyDirectoryServesLookups) {
  ASSERT_TRUE(open_cache()->store(make("alpha")).is_ok());
  // Root ignores permission bits, so the seam stands in for chmod 0500.
  set_write_fault_for_testing(EROFS);
  auto cache = open_cache();
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache->store(make("beta")).is_ok());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Read-only file system"), std::string::npos) << err;
  std::optional<Entry> found = cache->lookup("alpha");
  ASSERT_TRUE(found.has_value());
  cache->record_hit(found->meta);  // silently skipped
  EXPECT_EQ(cache->lookup("alpha")->meta.hits, 0u);
}

TEST_F(DiskCacheTest, EvictsLeastRecentlyUsedPastTheLimit) {
  OpenOptions options;
  options.max_bytes = 0;  // fill first, evict explicitly
  auto cache = open_cache(options);
  for (const char* key : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(cache->store(make(key, 4096)).is_ok());
  }
  // Make "a" the most recently used, and order the others by age explicitly: file times of
  // writes within one millisecond tie.
  auto age = [&](const char* key, int seconds_ago) {
    fs::last_write_time(meta_path(key), fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
  };
  age("a", 1);
  age("b", 40);
  age("c", 30);
  age("d", 20);
  std::uint64_t total = cache->scan().total_bytes;
  std::uint64_t one = total / 4;
  Removed removed = cache->evict_to(total - one);  // room for three: "b" goes
  EXPECT_EQ(removed.entries, 1u);
  EXPECT_FALSE(cache->lookup("b").has_value());
  removed = cache->evict_to(2 * one);  // "c" goes next
  EXPECT_EQ(removed.entries, 1u);
  EXPECT_FALSE(cache->lookup("c").has_value());
  EXPECT_TRUE(cache->lookup("a").has_value());
  EXPECT_TRUE(cache->lookup("d").has_value());
  EXPECT_LE(cache->scan().total_bytes, 2 * one);
}

TEST_F(DiskCacheTest, StoreEnforcesTheConfiguredLimit) {
  OpenOptions options;
  options.max_bytes = 3 * 4096;
  auto cache = open_cache(options);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(cache->store(make("key" + std::to_string(i), 2048)).is_ok());
  Scan scan = cache->scan();
  EXPECT_LE(scan.total_bytes, options.max_bytes);
  EXPECT_GE(scan.entries.size(), 1u);
  EXPECT_TRUE(cache->lookup("key9").has_value());  // the newest survives
}

TEST_F(DiskCacheTest, ResolvesUniqueHashPrefixes) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  std::string hash = hash128("alpha").hex();
  Expected<std::string> full = cache->resolve_prefix(hash.substr(0, 6));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(*full, hash);
  EXPECT_EQ(cache->resolve_prefix("zzzz").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(cache->store(make("beta")).is_ok());
  EXPECT_EQ(cache->resolve_prefix("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DiskCacheTest, LoadReportsDamageWithoutRemovingUnlessAsked) {
  auto cache = open_cache();
  ASSERT_TRUE(cache->store(make("alpha")).is_ok());
  fs::resize_file(artifact_path("alpha", kIrArtifact), 3);
  std::string hash = hash128("alpha").hex();
  EXPECT_FALSE(cache->load(hash, false).has_value());
  EXPECT_TRUE(fs::exists(meta_path("alpha")));
  EXPECT_FALSE(cache->load(hash, true).has_value());
  EXPECT_FALSE(fs::exists(meta_path("alpha")));
}

}  // namespace
}  // namespace convjit::disk_cache
