// File primitives of the disk cache: whole-file reads, and writes that appear atomically
// (temp file in the same directory, then rename) so no reader ever sees half a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.hpp"

namespace convjit::disk_cache {

/// Reads a whole file. NotFound when it does not exist (a plain cache miss, not damage).
Expected<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path);

/// Writes `bytes` to a temp file beside `path` and renames it into place. Readers see either
/// the old file or the new one. On failure the temp file is removed and `path` is untouched;
/// the Status carries the errno text (ENOSPC, EACCES, EROFS, ...).
Status write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);
Status write_file_atomic(const std::filesystem::path& path, std::string_view text);

/// The same inside the directory open as `dir_fd` (the disk cache's CacheDir): the file is
/// reached by name relative to the descriptor (openat), never by a path.
Expected<std::vector<std::uint8_t>> read_file_at(int dir_fd, std::string_view name);
Status write_file_atomic_at(int dir_fd, std::string_view name, std::span<const std::uint8_t> bytes);
Status write_file_atomic_at(int dir_fd, std::string_view name, std::string_view text);
/// unlinkat(); NotFound when the file is already gone.
Status remove_file_at(int dir_fd, std::string_view name);

/// Test seam: while non-zero, every write_file_atomic fails with this errno before touching the
/// disk (ENOSPC simulates a full disk, EROFS a read-only directory even when running as root).
void set_write_fault_for_testing(int error_number);
/// Test seam: while non-zero, every remove_file_at fails with this errno (EROFS: a read-only
/// cache, which root cannot otherwise be shown).
void set_remove_fault_for_testing(int error_number);
/// Test seam: while non-zero, a directory holding this many bytes is full: write_file_atomic_at
/// fails with ENOSPC when the directory's files and the new one would exceed it.
void set_space_for_testing(std::uint64_t bytes);

/// True for names write_file_atomic uses for its temp files (purge removes stale ones).
bool is_temp_file_name(std::string_view file_name);

}  // namespace convjit::disk_cache
