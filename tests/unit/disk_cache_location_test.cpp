// Where the disk cache lives, and which directories it refuses to load code from.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/location.hpp"

namespace convjit::disk_cache {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class CacheLocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "convjit-loc-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path root_;
};

TEST_F(CacheLocationTest, EnvironmentPrecedence) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("CONVJIT_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(configured_cache_dir(), fs::path("/home/someone/.cache/convjit"));
  }
  {
    ScopedEnv dir("CONVJIT_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(configured_cache_dir(), fs::path("/xdg/convjit"));
  }
  {
    ScopedEnv dir("CONVJIT_CACHE_DIR", "/explicit/place");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(configured_cache_dir(), fs::path("/explicit/place"));
  }
  {
    ScopedEnv dir("CONVJIT_CACHE_DIR", "off");
    EXPECT_FALSE(configured_cache_dir().has_value());
  }
}

TEST_F(CacheLocationTest, CreatesMissingParentsAndAPrivateDirectory) {
  fs::path dir = root_ / "a" / "b" / "convjit";
  ASSERT_TRUE(prepare_cache_dir(dir, ::geteuid()).is_ok());
  struct stat info {};
  ASSERT_EQ(::stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  EXPECT_TRUE(prepare_cache_dir(dir, ::geteuid()).is_ok());  // idempotent
}

TEST_F(CacheLocationTest, RefusesGroupOrWorldWritable) {
  for (mode_t mode : {0770, 0703, 0777}) {
    fs::path dir = root_ / fmt::format("mode{:o}", mode);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    Status status = prepare_cache_dir(dir, ::geteuid());
    EXPECT_EQ(status.code(), StatusCode::kUnavailable);
    EXPECT_NE(status.message().find("writable by group or others"), std::string::npos)
        << status.message();
  }
}

TEST_F(CacheLocationTest, RefusesADirectoryOwnedBySomeoneElse) {
  fs::path dir = root_ / "theirs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  // The owner seam: this process pretends to be another user.
  Status status = prepare_cache_dir(dir, ::geteuid() + 4242);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("not by this user"), std::string::npos) << status.message();
}

TEST_F(CacheLocationTest, RefusesASymlinkToSomeoneElsesPlace) {
  fs::path target = root_ / "elsewhere";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  fs::path link = root_ / "link";
  fs::create_directory_symlink(target, link);
  if (::geteuid() == 0) {
    // As root the target can really belong to another user.
    ASSERT_EQ(::chown(target.c_str(), 4242, 4242), 0);
    Status status = prepare_cache_dir(link, 0);
    EXPECT_EQ(status.code(), StatusCode::kUnavailable);
    EXPECT_NE(status.message().find("through a symlink"), std::string::npos) << status.message();
  }
  // A link to a world-writable place is refused for everyone.
  fs::path open_place = root_ / "open";
  ASSERT_EQ(::mkdir(open_place.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_place.c_str(), 01777), 0);
  fs::path link2 = root_ / "link2";
  fs::create_directory_symlink(open_place, link2);
  EXPECT_EQ(prepare_cache_dir(link2, ::geteuid()).code(), StatusCode::kUnavailable);
  // A link to our own private directory is fine.
  fs::path mine = root_ / "mine";
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  fs::path link3 = root_ / "link3";
  fs::create_directory_symlink(mine, link3);
  EXPECT_TRUE(prepare_cache_dir(link3, ::geteuid()).is_ok());
}

TEST_F(CacheLocationTest, RefusesAFileAndADanglingLink) {
  fs::path file = root_ / "file";
  { std::FILE* f = std::fopen(file.c_str(), "w"); std::fclose(f); }
  EXPECT_EQ(prepare_cache_dir(file, ::geteuid()).code(), StatusCode::kUnavailable);
  fs::path dangling = root_ / "dangling";
  fs::create_directory_symlink(root_ / "nowhere", dangling);
  EXPECT_EQ(prepare_cache_dir(dangling, ::geteuid()).code(), StatusCode::kUnavailable);
}

TEST_F(CacheLocationTest, OpenWithoutCreateReportsAMissingDirectory) {
  OpenOptions options;
  options.create = false;
  Expected<std::unique_ptr<DiskCache>> cache = DiskCache::open(root_ / "missing", options);
  ASSERT_FALSE(cache.has_value());
  EXPECT_EQ(cache.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(root_ / "missing"));
}

TEST_F(CacheLocationTest, RefusesAParentWritableByOthersUnlessSticky) {
  for (mode_t mode : {0770, 0707, 0777}) {
    fs::path parent = root_ / fmt::format("shared{:o}", mode);
    ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(parent.c_str(), mode), 0);
    // Refused whether the cache directory already exists (private) or would be created.
    for (bool exists : {false, true}) {
      fs::path dir = parent / (exists ? "made" : "new");
      if (exists) ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
      Status status = prepare_cache_dir(dir, ::geteuid());
      EXPECT_EQ(status.code(), StatusCode::kUnavailable) << dir;
      EXPECT_NE(status.message().find("above the cache is writable by group or others"),
                std::string::npos)
          << status.message();
    }
  }
  // Sticky, like /tmp: others may add names there but not replace ours.
  fs::path sticky = root_ / "sticky";
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  EXPECT_TRUE(prepare_cache_dir(sticky / "convjit", ::geteuid()).is_ok());
  // A check from further up: a grandparent writable by others is refused as well.
  fs::path open_top = root_ / "open";
  ASSERT_EQ(::mkdir(open_top.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_top.c_str(), 0777), 0);
  EXPECT_EQ(prepare_cache_dir(open_top / "a" / "b" / "convjit", ::geteuid()).code(),
            StatusCode::kUnavailable);
}

TEST_F(CacheLocationTest, RefusesAParentOrALinkOwnedBySomeoneElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  fs::path theirs = root_ / "theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
  fs::path inside = theirs / "convjit";
  ASSERT_EQ(::mkdir(inside.c_str(), 0700), 0);
  Status status = prepare_cache_dir(inside, 0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("above the cache is owned by uid 4242"), std::string::npos)
      << status.message();
  // Someone else's link to our own private directory: they chose where it points.
  fs::path mine = root_ / "mine";
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  fs::path link = root_ / "their-link";
  fs::create_directory_symlink(mine, link);
  ASSERT_EQ(::lchown(link.c_str(), 4242, 4242), 0);
  status = prepare_cache_dir(link, 0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("symlink owned by uid 4242"), std::string::npos)
      << status.message();
}

// The directory is checked once and then used through its handle: swapping the path for a
// link to a planted directory afterwards changes nothing for an open cache.
TEST_F(CacheLocationTest, ASwappedDirectoryIsNeverUsed) {
  auto entry = [](const std::string& key, std::uint8_t fill) {
    Entry e;
    e.meta.key = key;
    e.meta.backend = "x86";
    e.artifacts[kCodeArtifact] = std::vector<std::uint8_t>(64, fill);
    return e;
  };
  fs::path dir = root_ / "cache";
  Expected<std::unique_ptr<DiskCache>> cache = DiskCache::open(dir);
  ASSERT_TRUE(cache.has_value()) << cache.status().message();
  ASSERT_TRUE((*cache)->store(entry("alpha", 0x11)).is_ok());

  // Someone moves the directory away and puts a link to their own in its place, with an
  // entry for the same key whose checksums match its own (planted) bytes.
  fs::path planted = root_ / "planted";
  {
    Expected<std::unique_ptr<DiskCache>> theirs = DiskCache::open(planted);
    ASSERT_TRUE(theirs.has_value());
    ASSERT_TRUE((*theirs)->store(entry("alpha", 0xCC)).is_ok());
  }
  fs::rename(dir, root_ / "moved");
  fs::create_directory_symlink(planted, dir);

  std::optional<Entry> found = (*cache)->lookup("alpha");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->artifact(kCodeArtifact), std::vector<std::uint8_t>(64, 0x11));
  ASSERT_TRUE((*cache)->store(entry("beta", 0x22)).is_ok());
  Expected<std::unique_ptr<DiskCache>> moved = DiskCache::open(root_ / "moved");
  ASSERT_TRUE(moved.has_value());
  EXPECT_TRUE((*moved)->lookup("beta").has_value());
  Expected<std::unique_ptr<DiskCache>> theirs = DiskCache::open(planted);
  ASSERT_TRUE(theirs.has_value());
  EXPECT_FALSE((*theirs)->lookup("beta").has_value());
  (*cache)->evict_to(0);  // removes from the real directory only
  EXPECT_TRUE((*theirs)->lookup("alpha").has_value());
  EXPECT_FALSE((*moved)->lookup("alpha").has_value());
}

TEST_F(CacheLocationTest, RelativePathsAndTrailingSlashes) {
  const fs::path saved = fs::current_path();
  fs::current_path(root_);
  EXPECT_TRUE(prepare_cache_dir("rel/convjit/", ::geteuid()).is_ok());
  EXPECT_TRUE(check_cache_dir(root_ / "rel" / "convjit", ::geteuid()).is_ok());
  EXPECT_EQ(check_cache_dir("rel/nothing", ::geteuid()).code(), StatusCode::kNotFound);
  fs::current_path(saved);
  EXPECT_EQ(prepare_cache_dir("/", ::geteuid()).code(), StatusCode::kUnavailable);
}

TEST_F(CacheLocationTest, MaxBytesFromTheEnvironment) {
  {
    ScopedEnv max("CONVJIT_CACHE_MAX_BYTES", nullptr);
    EXPECT_EQ(DiskCache::configured_max_bytes(), kDefaultMaxBytes);
  }
  {
    ScopedEnv max("CONVJIT_CACHE_MAX_BYTES", "64M");
    EXPECT_EQ(DiskCache::configured_max_bytes(), 64ull << 20);
  }
  {
    ScopedEnv max("CONVJIT_CACHE_MAX_BYTES", "12345");
    EXPECT_EQ(DiskCache::configured_max_bytes(), 12345u);
  }
  {
    ScopedEnv max("CONVJIT_CACHE_MAX_BYTES", "lots");
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(DiskCache::configured_max_bytes(), kDefaultMaxBytes);
    EXPECT_NE(::testing::internal::GetCapturedStderr().find("not a size"), std::string::npos);
  }
}

}  // namespace
}  // namespace convjit::disk_cache
