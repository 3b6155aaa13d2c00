#include "runtime/disk_cache/disk_cache.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "frontend/hash.hpp"
#include "runtime/disk_cache/file_io.hpp"
#include "runtime/disk_cache/location.hpp"

namespace convjit::disk_cache {
namespace {

// Leftovers younger than this may belong to a writer that is still running.
constexpr std::int64_t kLeftoverAgeMs = 10 * 60 * 1000;
constexpr std::size_t kHashHexDigits = 32;

std::string checksum_of(std::span<const std::uint8_t> bytes) {
  return hash128(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())).hex();
}

bool is_hash_hex(std::string_view s) {
  return s.size() == kHashHexDigits &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Groups the directory's files by the key hash that starts their name.
struct Group {
  std::optional<DirFile> meta;
  std::vector<DirFile> artifacts;
  std::uint64_t bytes = 0;
};

std::map<std::string, Group> group_files(const std::vector<DirFile>& files,
                                         std::vector<DirFile>* others) {
  std::map<std::string, Group> groups;
  for (const DirFile& f : files) {
    std::string_view name = f.name;
    if (name.size() > kHashHexDigits && is_hash_hex(name.substr(0, kHashHexDigits)) &&
        !is_temp_file_name(name)) {
      Group& g = groups[std::string(name.substr(0, kHashHexDigits))];
      g.bytes += f.bytes;
      if (name.substr(kHashHexDigits) == ".json") g.meta = f;
      else if (name[kHashHexDigits] == '-') g.artifacts.push_back(f);
      else if (others) others->push_back(f);
    } else if (others) {
      others->push_back(f);
    }
  }
  return groups;
}

std::uint64_t parse_size(std::string_view text, bool* ok) {
  *ok = false;
  if (text.empty()) return 0;
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) value = value * 10 + (text[i] - '0');
  if (i == 0) return 0;
  std::string_view suffix = text.substr(i);
  std::uint64_t scale = 1;
  if (suffix == "" || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") scale = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") scale = 1ull << 30;
  else return 0;
  *ok = true;
  return value * scale;
}

}  // namespace

std::string_view library_version() { return CONVJIT_VERSION; }

void warn(std::string_view message) {
  std::fprintf(stderr, "convjit: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

std::uint64_t DiskCache::configured_max_bytes() {
  const char* text = std::getenv("CONVJIT_CACHE_MAX_BYTES");
  if (text == nullptr || text[0] == '\0') return kDefaultMaxBytes;
  bool ok = false;
  std::uint64_t value = parse_size(text, &ok);
  if (!ok) {
    warn(fmt::format("CONVJIT_CACHE_MAX_BYTES={} is not a size (e.g. 268435456, 256M, 1G); "
                     "using {} bytes", text, kDefaultMaxBytes));
    return kDefaultMaxBytes;
  }
  return value;
}

void Removed::add(const Removed& other) {
  entries += other.entries;
  bytes += other.bytes;
  failed += other.failed;
  if (error.empty()) error = other.error;
}

Expected<std::unique_ptr<DiskCache>> DiskCache::open(const std::filesystem::path& dir,
                                                     const OpenOptions& options) {
  Expected<CacheDir> opened = CacheDir::open(dir, options.owner_uid, options.create);
  if (!opened) return opened.status();
  OpenOptions resolved = options;
  if (resolved.library_version.empty()) resolved.library_version = std::string(library_version());
  return std::unique_ptr<DiskCache>(new DiskCache(std::move(*opened), std::move(resolved)));
}

DiskCache* DiskCache::process_default() {
  // Opened once: the safety checks and their warning happen once per process.
  static DiskCache* const cache = []() -> DiskCache* {
    std::optional<std::filesystem::path> dir = configured_cache_dir();
    if (!dir) return nullptr;
    OpenOptions options;
    options.max_bytes = configured_max_bytes();
    Expected<std::unique_ptr<DiskCache>> opened = open(*dir, options);
    if (!opened) {
      warn(fmt::format("disk kernel cache disabled: {}; kernels are cached in memory only",
                       opened.status().message()));
      return nullptr;
    }
    // The cache lives as long as the process. Hit counts still queued for the background
    // writer are written before the process exits, so a normal exit never leaves a
    // half-written temp file behind.
    std::atexit([] { process_default()->finish_background_writes(); });
    return opened->release();
  }();
  return cache;
}

Expected<Entry> DiskCache::verify(std::string_view key_hash, std::optional<std::string_view> key) {
  Expected<std::vector<std::uint8_t>> meta_bytes =
      read_file_at(dir_.fd(), meta_file_name(key_hash));
  if (!meta_bytes) return meta_bytes.status();
  Expected<EntryMeta> meta = meta_from_json(
      std::string_view(reinterpret_cast<const char*>(meta_bytes->data()), meta_bytes->size()));
  if (!meta) return invalid_argument("unreadable metadata: " + meta.status().message());
  if (meta->format != kFormatVersion) {
    return invalid_argument(fmt::format("cache format {} (this library writes {})", meta->format,
                                        kFormatVersion));
  }
  if (meta->library_version != options_.library_version) {
    return invalid_argument(fmt::format("written by convjit {} (this is {})",
                                        meta->library_version, options_.library_version));
  }
  if (meta->key_hash != key_hash || hash128(meta->key).hex() != key_hash) {
    return invalid_argument("key does not match the file name");
  }
  if (key && meta->key != *key) return invalid_argument("stored key differs from the looked-up key");
  Entry entry;
  for (const auto& [name, record] : meta->artifacts) {
    if (!record.file.starts_with(key_hash)) {
      return invalid_argument(fmt::format("artifact '{}' belongs to another entry", name));
    }
    Expected<std::vector<std::uint8_t>> bytes = read_file_at(dir_.fd(), record.file);
    if (!bytes) {
      // Gone: evicted or replaced by another process between our two reads. A miss, not damage.
      if (bytes.status().code() == StatusCode::kNotFound) return bytes.status();
      return invalid_argument(bytes.status().message());
    }
    if (bytes->size() != record.size) {
      return invalid_argument(fmt::format("artifact '{}' has {} bytes, metadata says {}", name,
                                          bytes->size(), record.size));
    }
    if (checksum_of(*bytes) != record.checksum) {
      return invalid_argument(fmt::format("artifact '{}' fails its checksum", name));
    }
    entry.artifacts.emplace(name, std::move(*bytes));
  }
  entry.meta = std::move(*meta);
  return entry;
}

Expected<Entry> DiskCache::load(std::string_view key_hash, bool remove_if_bad) {
  Expected<Entry> entry = verify(key_hash, std::nullopt);
  if (!entry && remove_if_bad && entry.status().code() == StatusCode::kInvalidArgument) {
    remove(key_hash);
  }
  return entry;
}

std::optional<Entry> DiskCache::lookup(std::string_view key) {
  std::string key_hash = hash128(key).hex();
  Expected<Entry> entry = verify(key_hash, key);
  if (entry) return std::move(*entry);
  if (entry.status().code() == StatusCode::kInvalidArgument) {
    warn(fmt::format("disk cache entry {} in {} dropped ({}); recompiling it",
                     key_hash.substr(0, 12), dir().string(), entry.status().message()));
    remove(key_hash);
  }
  return std::nullopt;
}

void DiskCache::warn_write_failure(const Status& status) {
  writable_.store(false);
  std::call_once(write_warning_, [&] {
    warn(fmt::format("cannot write to the disk kernel cache ({}); this process keeps its "
                     "kernels in memory only", status.message()));
  });
}

Status DiskCache::store(Entry entry) {
  if (!writable_.load()) return {StatusCode::kUnavailable, "disk cache is not writable"};
  EntryMeta& meta = entry.meta;
  meta.format = kFormatVersion;
  meta.key_hash = hash128(meta.key).hex();
  meta.library_version = options_.library_version;
  std::int64_t now = now_unix_ms();
  meta.created_ms = meta.last_used_ms = now;
  meta.compiles = 1;
  meta.hits = 0;
  // Another process may have stored this key meanwhile: keep its history.
  if (Expected<Entry> previous = verify(meta.key_hash, meta.key)) {
    meta.created_ms = previous->meta.created_ms;
    meta.hits = previous->meta.hits;
    meta.compiles = previous->meta.compiles + 1;
  }
  return write_within_limit(entry);
}

Status DiskCache::import(Entry entry) {
  if (!writable_.load()) return {StatusCode::kUnavailable, "disk cache is not writable"};
  entry.meta.format = kFormatVersion;
  entry.meta.key_hash = hash128(entry.meta.key).hex();
  return write_within_limit(entry);
}

Status DiskCache::write_within_limit(Entry& entry) {
  // The metadata as it stands, plus room for its artifact records: close enough.
  std::uint64_t incoming = meta_to_json(entry.meta).size() + 256 * entry.artifacts.size();
  for (const auto& [name, bytes] : entry.artifacts) incoming += bytes.size();
  // Room first, so that the directory never holds more than the limit, not even for a while.
  if (options_.max_bytes > 0) {
    evict_to(options_.max_bytes > incoming ? options_.max_bytes - incoming : 0);
  }
  Status written = write_entry(entry);
  if (written.code() == StatusCode::kResourceExhausted) {
    // The file system is full (or the user's quota): older entries give way to the new one.
    const std::uint64_t used = scan().total_bytes;
    evict_to(used > incoming ? used - incoming : 0);
    written = write_entry(entry);
  }
  if (!written.is_ok()) warn_write_failure(written);
  return written;
}

// Artifacts first, metadata last: until the metadata's rename the entry does not exist.
Status DiskCache::write_entry(Entry& entry) {
  EntryMeta& meta = entry.meta;
  meta.artifacts.clear();
  for (const auto& [name, bytes] : entry.artifacts) {
    ArtifactRecord record;
    record.size = bytes.size();
    record.checksum = checksum_of(bytes);
    record.file = artifact_file_name(meta.key_hash, name, record.checksum);
    CONVJIT_RETURN_IF_ERROR(write_file_atomic_at(dir_.fd(), record.file, bytes));
    meta.artifacts.emplace(name, std::move(record));
  }
  meta.code_size = entry.artifact(kCodeArtifact).size();
  return write_file_atomic_at(dir_.fd(), meta_file_name(meta.key_hash), meta_to_json(meta));
}

void DiskCache::record_hit(const EntryMeta& meta) {
  if (!writable_.load()) return;
  // Under the lock eviction takes: the entry cannot be evicted between the check that it is
  // still there and the rename of its new metadata, so a late count never brings back the
  // metadata of an evicted entry (whose artifacts are gone).
  const CacheDir::Lock lock = dir_.lock();
  const std::string name = meta_file_name(meta.key_hash);
  Expected<std::vector<std::uint8_t>> bytes = read_file_at(dir_.fd(), name);
  if (!bytes) return;  // evicted or removed meanwhile: nothing to count
  Expected<EntryMeta> current =
      meta_from_json(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  // Replaced by a damaged file or another key's: not ours to touch (verify drops it).
  if (!current || current->key != meta.key) return;
  current->hits += 1;
  current->last_used_ms = now_unix_ms();
  // A failure here only loses a count; it is not worth a warning of its own.
  (void)write_file_atomic_at(dir_.fd(), name, meta_to_json(*current));
}

void DiskCache::record_hit_in_background(const EntryMeta& meta) {
  std::lock_guard<std::mutex> lock(hits_mutex_);
  pending_hits_.push_back(meta);
  if (!hit_writer_.joinable()) {
    hit_writer_ = std::thread([this] {
      std::unique_lock<std::mutex> guard(hits_mutex_);
      while (true) {
        hits_pending_.wait(guard, [this] { return stopping_ || !pending_hits_.empty(); });
        if (pending_hits_.empty()) return;  // stopping, nothing left
        std::vector<EntryMeta> batch = std::move(pending_hits_);
        pending_hits_.clear();
        guard.unlock();
        for (const EntryMeta& m : batch) record_hit(m);
        guard.lock();
      }
    });
  }
  hits_pending_.notify_one();
}

void DiskCache::finish_background_writes() {
  {
    std::lock_guard<std::mutex> lock(hits_mutex_);
    stopping_ = true;
  }
  hits_pending_.notify_one();
  if (hit_writer_.joinable()) hit_writer_.join();
}

DiskCache::~DiskCache() { finish_background_writes(); }

Expected<std::string> DiskCache::resolve_prefix(std::string_view prefix) const {
  std::string lowered;
  for (char c : prefix) lowered += static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  if (lowered.empty()) return invalid_argument("empty key prefix");
  std::vector<std::string> matches;
  for (const auto& [hash, group] : group_files(dir_.list(), nullptr)) {
    if (group.meta && hash.starts_with(lowered)) matches.push_back(hash);
  }
  if (matches.empty()) return Status{StatusCode::kNotFound, fmt::format("no entry matches '{}'", prefix)};
  if (matches.size() > 1) {
    return invalid_argument(fmt::format("'{}' matches {} entries; give more digits", prefix,
                                        matches.size()));
  }
  return matches.front();
}

Scan DiskCache::scan() const {
  Scan result;
  std::vector<DirFile> others;
  std::vector<DirFile> files = dir_.list();
  for (const DirFile& f : files) result.total_bytes += f.bytes;
  for (const auto& [hash, group] : group_files(files, &others)) {
    if (!group.meta) continue;  // orphaned artifacts: not an entry
    ScannedEntry scanned;
    scanned.key_hash = hash;
    scanned.bytes = group.bytes;
    scanned.mtime_ms = group.meta->mtime_ms;
    Expected<std::vector<std::uint8_t>> bytes = read_file_at(dir_.fd(), group.meta->name);
    if (!bytes) {
      scanned.problem = bytes.status().message();
    } else {
      Expected<EntryMeta> meta = meta_from_json(
          std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
      if (meta) scanned.meta = std::move(*meta);
      else scanned.problem = meta.status().message();
    }
    result.entries.push_back(std::move(scanned));
  }
  return result;
}

Removed DiskCache::remove(std::string_view key_hash) {
  const CacheDir::Lock lock = dir_.lock();
  return remove_locked(key_hash);
}

Removed DiskCache::remove_locked(std::string_view key_hash) {
  Removed removed;
  auto groups = group_files(dir_.list(), nullptr);
  auto it = groups.find(std::string(key_hash));
  if (it == groups.end()) return removed;
  if (it->second.meta) {
    // The metadata first: once it is gone the entry no longer exists for any reader.
    Status gone = remove_file_at(dir_.fd(), it->second.meta->name);
    if (!gone.is_ok() && gone.code() != StatusCode::kNotFound) {
      removed.failed = 1;
      removed.error = gone.message();
      return removed;
    }
    if (gone.is_ok()) {
      removed.entries = 1;
      removed.bytes += it->second.meta->bytes;
    }
  }
  for (const DirFile& f : it->second.artifacts) {
    // A leftover artifact is an orphan that a later eviction clears.
    if (remove_file_at(dir_.fd(), f.name).is_ok()) removed.bytes += f.bytes;
  }
  return removed;
}

Removed DiskCache::evict_to(std::uint64_t max_bytes) {
  const CacheDir::Lock lock = dir_.lock();
  return evict_locked(max_bytes);
}

Removed DiskCache::evict_locked(std::uint64_t max_bytes) {
  Removed removed;
  std::vector<DirFile> others;
  std::vector<DirFile> files = dir_.list();
  std::uint64_t total = 0;
  for (const DirFile& f : files) total += f.bytes;
  std::int64_t old = now_unix_ms() - kLeftoverAgeMs;
  auto groups = group_files(files, &others);
  for (const DirFile& f : others) {
    if (is_temp_file_name(f.name) && f.mtime_ms < old &&
        remove_file_at(dir_.fd(), f.name).is_ok()) {
      total -= f.bytes;
      removed.bytes += f.bytes;
    }
  }
  std::vector<std::pair<std::int64_t, std::string>> by_age;
  for (auto& [hash, group] : groups) {
    if (group.meta) {
      by_age.emplace_back(group.meta->mtime_ms, hash);
      continue;
    }
    bool all_old = std::all_of(group.artifacts.begin(), group.artifacts.end(),
                               [&](const DirFile& f) { return f.mtime_ms < old; });
    if (all_old) {
      for (const DirFile& f : group.artifacts) {
        if (remove_file_at(dir_.fd(), f.name).is_ok()) {
          total -= f.bytes;
          removed.bytes += f.bytes;
        }
      }
    }
  }
  if (total <= max_bytes) return removed;
  // Least recently used first: every hit rewrites the metadata, so its time is the last use.
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [age, hash] : by_age) {
    if (total <= max_bytes) break;
    Removed one = remove_locked(hash);
    total -= std::min(total, one.bytes);
    removed.add(one);
  }
  return removed;
}

}  // namespace convjit::disk_cache
