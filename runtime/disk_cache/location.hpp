// Where the disk cache lives and whether that place is safe to load code from.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "support/status.hpp"

namespace convjit::disk_cache {

/// The configured cache directory: $CONVJIT_CACHE_DIR, else $XDG_CACHE_HOME/convjit, else
/// $HOME/.cache/convjit. nullopt when CONVJIT_CACHE_DIR=off (or no HOME to derive it from).
std::optional<std::filesystem::path> configured_cache_dir();

/// Creates `dir` (mode 0700; missing parents 0755) unless it exists, then checks that code
/// loaded from it cannot have been planted by someone else, as CacheDir::open does (which the
/// disk cache uses: it keeps the directory open). Unavailable with the reason when the
/// directory is refused or cannot be created.
Status prepare_cache_dir(const std::filesystem::path& dir, uid_t owner_uid);

/// Only checks, never creates: NotFound when `dir` does not exist.
Status check_cache_dir(const std::filesystem::path& dir, uid_t owner_uid);

}  // namespace convjit::disk_cache
