// The disk cache's directory as an open handle. The cache feeds machine code into the process,
// so where that code comes from is checked once, when the directory is opened, and never
// again by name: every later operation is relative to the handle (openat, renameat,
// unlinkat, fstatat), so renaming or replacing the path afterwards changes nothing for this
// process. The threat model is in docs/CACHE.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.hpp"

namespace convjit::disk_cache {

/// A regular file of the cache directory, as a listing sees it.
struct DirFile {
  std::string name;
  std::uint64_t bytes = 0;
  std::int64_t mtime_ms = 0;
};

class CacheDir {
 public:
  /// Opens `dir` for a cache owned by `owner_uid` (creating it, mode 0700, and missing parents,
  /// 0755, when `create`). Refused (Unavailable, with the reason) unless:
  ///  - every directory above it, from /, is owned by root or `owner_uid` and writable by
  ///    nobody else, or is sticky (like /tmp: others may add entries but not replace ours);
  ///    symbolic links among the parents are resolved first and the real directories checked;
  ///  - the directory itself is a directory owned by `owner_uid`, writable by nobody else, and
  ///    opened without following a link. A symbolic link as the last component is accepted
  ///    only when the link is owned by root or `owner_uid`; its target is then checked by
  ///    these same rules.
  /// NotFound when it does not exist and `create` is false.
  static Expected<CacheDir> open(const std::filesystem::path& dir, uid_t owner_uid, bool create);

  CacheDir(CacheDir&& other) noexcept;
  CacheDir& operator=(CacheDir&& other) noexcept;
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;
  ~CacheDir();

  /// The directory's descriptor (O_DIRECTORY, close-on-exec).
  int fd() const { return fd_; }
  /// The path it was opened by: for messages only, never to reach a file.
  const std::filesystem::path& path() const { return path_; }

  /// Regular files (not links, not directories) in the directory, in no particular order.
  std::vector<DirFile> list() const;

  /// An exclusive lock on the directory shared by every process (flock on its ".lock"
  /// file), held while it lives. Eviction, removal and hit counting take it, so that a hit
  /// counted in one process cannot bring back the metadata of an entry another process just
  /// evicted. Without a lock file (a read-only directory) it holds nothing: nobody can change
  /// such a directory anyway.
  class Lock {
   public:
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Lock& operator=(Lock&&) = delete;
    Lock(const Lock&) = delete;
    ~Lock();

   private:
    int fd_;
  };
  Lock lock() const;

  /// Name of the lock file; not an entry, never evicted.
  static constexpr std::string_view kLockFileName = ".lock";

 private:
  CacheDir(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace convjit::disk_cache
