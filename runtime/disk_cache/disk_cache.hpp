// The persistent kernel cache: one directory of entries shared by every process of a user.
// Readers never block and never trust what they read: an entry is returned only after its
// key, versions and artifact checksums match; anything else is dropped (and recompiled by the
// caller), never executed.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/disk_cache/cache_dir.hpp"
#include "runtime/disk_cache/entry.hpp"
#include "support/status.hpp"

namespace convjit::disk_cache {

/// Size limit when CONVJIT_CACHE_MAX_BYTES is unset.
inline constexpr std::uint64_t kDefaultMaxBytes = 256ull << 20;

struct OpenOptions {
  /// Who must own the directory (tests simulate a foreign owner through it).
  uid_t owner_uid = ::geteuid();
  /// Least-recently-used entries are evicted past this many bytes; 0: no limit.
  std::uint64_t max_bytes = kDefaultMaxBytes;
  /// Create the directory when missing (the library does; the inspection tool does not).
  bool create = true;
  /// The version entries must carry, others are stale; empty: this library's version (tests
  /// fake another version through it).
  std::string library_version;
};

/// One entry as a directory scan sees it: metadata (if readable) and bytes on disk.
struct ScannedEntry {
  std::string key_hash;
  std::optional<EntryMeta> meta;   // nullopt: the metadata file is unreadable or malformed
  std::string problem;             // why meta is nullopt
  std::uint64_t bytes = 0;         // metadata plus artifact files
  std::int64_t mtime_ms = 0;       // of the metadata file: the last use (hits rewrite it)
};

/// What a directory scan found.
struct Scan {
  std::vector<ScannedEntry> entries;
  std::uint64_t total_bytes = 0;   // every file, stale temp files and orphans included
};

/// Counts of what evict() / purge really removed, and of what could not be removed.
struct Removed {
  std::size_t entries = 0;
  std::uint64_t bytes = 0;
  /// Entries that are still there because their metadata could not be deleted.
  std::size_t failed = 0;
  /// The first such failure's reason (errno text), empty when none failed.
  std::string error;

  void add(const Removed& other);
};

class DiskCache {
 public:
  /// Opens (and with options.create, makes) a cache directory after the safety checks of
  /// CacheDir::open; Unavailable with the reason when the directory is refused. The directory
  /// stays open: every later file operation is relative to it, never to its path.
  static Expected<std::unique_ptr<DiskCache>> open(const std::filesystem::path& dir,
                                                   const OpenOptions& options = {});

  /// The process's cache as configured by the environment (CONVJIT_CACHE_DIR, XDG_CACHE_HOME,
  /// HOME, CONVJIT_CACHE_MAX_BYTES). nullptr when disabled or refused; a refusal prints one
  /// warning on stderr, once per process.
  static DiskCache* process_default();

  /// CONVJIT_CACHE_MAX_BYTES ("1048576", "64M", "2G"), else kDefaultMaxBytes.
  static std::uint64_t configured_max_bytes();

  /// The verified entry stored under `key`, or nullopt. A damaged, foreign-version or
  /// mismatching entry is removed with one warning on stderr and reported as a miss.
  std::optional<Entry> lookup(std::string_view key);

  /// Stores an entry (meta.key and the artifacts must be set; hashes, checksums, file names and
  /// times are filled in here). First makes room: least recently used entries are evicted until
  /// the directory and the new entry fit the size limit. Artifacts are written first and the
  /// metadata last, each through a temp file and rename(). A full disk (ENOSPC, EDQUOT) evicts
  /// as much as the entry needs and tries once more. The first write failure that remains
  /// prints one warning and turns further stores of this process into no-ops.
  Status store(Entry entry);

  /// Stores an entry brought from elsewhere (`convjit cache import`) as it is: its times,
  /// counts and versions are kept; checksums and file names are recomputed.
  Status import(Entry entry);

  /// Counts a disk hit: under the directory lock, re-reads the entry's metadata and, only if
  /// the entry is still there with the same key, rewrites it (temp file + rename) with
  /// hits + 1 and the time. An entry evicted meanwhile stays evicted.
  void record_hit(const EntryMeta& meta);

  /// record_hit() on this cache's writer thread (started on first use), so that a disk hit
  /// costs the compiling thread no file write. The destructor writes what is pending; a
  /// process that exits without destroying the cache may lose those counts.
  void record_hit_in_background(const EntryMeta& meta);

  ~DiskCache();
  /// Writes the hit counts still queued for the background writer and stops it.
  void finish_background_writes();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// Loads and verifies the entry named by its full key hash. Errors say what is wrong; with
  /// `remove_if_bad` a damaged entry is also deleted.
  Expected<Entry> load(std::string_view key_hash, bool remove_if_bad);

  /// The full key hash of the one entry whose hash starts with `prefix` (NotFound, or
  /// InvalidArgument when ambiguous).
  Expected<std::string> resolve_prefix(std::string_view prefix) const;

  /// Every entry in the directory, with sizes.
  Scan scan() const;

  /// Deletes an entry's metadata (first, so readers stop finding it) and its artifacts, under
  /// the directory lock. Counts only what was deleted; an entry whose metadata cannot be
  /// deleted (a read-only directory) is counted in `failed` with the reason.
  Removed remove(std::string_view key_hash);

  /// Evicts least-recently-used entries (by last use: the metadata's modification time, which
  /// every hit refreshes) until the directory holds at most `max_bytes`, and clears leftovers
  /// of crashed writers (temp files, artifacts without metadata) older than a few minutes.
  Removed evict_to(std::uint64_t max_bytes);

  /// The path the directory was opened by (for messages; files are reached through the handle).
  const std::filesystem::path& dir() const { return dir_.path(); }
  const OpenOptions& options() const { return options_; }
  /// False once a write failed (read-only directory, full disk): lookups still work.
  bool writable() const { return writable_.load(); }

 private:
  DiskCache(CacheDir dir, OpenOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  Expected<Entry> verify(std::string_view key_hash, std::optional<std::string_view> key);
  void warn_write_failure(const Status& status);
  Status write_entry(Entry& entry);
  // write_entry within the size limit: room made first, and once more on a full disk.
  Status write_within_limit(Entry& entry);
  Removed remove_locked(std::string_view key_hash);
  Removed evict_locked(std::uint64_t max_bytes);

  CacheDir dir_;
  OpenOptions options_;
  std::atomic<bool> writable_{true};
  std::once_flag write_warning_;
  std::mutex hits_mutex_;
  std::condition_variable hits_pending_;
  std::vector<EntryMeta> pending_hits_;  // guarded by hits_mutex_
  bool stopping_ = false;                // guarded by hits_mutex_
  std::thread hit_writer_;
};

/// The library's version (CONVJIT_VERSION), which every entry records.
std::string_view library_version();

/// Prints "convjit: warning: <message>" on stderr (the disk cache's only output).
void warn(std::string_view message);

}  // namespace convjit::disk_cache
