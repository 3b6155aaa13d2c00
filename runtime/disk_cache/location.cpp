#include "runtime/disk_cache/location.hpp"

#include <cstdlib>
#include <string_view>

#include "runtime/disk_cache/cache_dir.hpp"

namespace convjit::disk_cache {
namespace {

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

}  // namespace

std::optional<std::filesystem::path> configured_cache_dir() {
  if (const char* dir = env_or_null("CONVJIT_CACHE_DIR")) {
    if (std::string_view(dir) == "off") return std::nullopt;
    return std::filesystem::path(dir);
  }
  if (const char* xdg = env_or_null("XDG_CACHE_HOME")) {
    return std::filesystem::path(xdg) / "convjit";
  }
  if (const char* home = env_or_null("HOME")) {
    return std::filesystem::path(home) / ".cache" / "convjit";
  }
  return std::nullopt;
}

Status check_cache_dir(const std::filesystem::path& dir, uid_t owner_uid) {
  Expected<CacheDir> opened = CacheDir::open(dir, owner_uid, /*create=*/false);
  return opened ? Status::ok() : opened.status();
}

Status prepare_cache_dir(const std::filesystem::path& dir, uid_t owner_uid) {
  Expected<CacheDir> opened = CacheDir::open(dir, owner_uid, /*create=*/true);
  return opened ? Status::ok() : opened.status();
}

}  // namespace convjit::disk_cache
