#include "runtime/disk_cache/cache_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

namespace convjit::disk_cache {
namespace {

namespace fs = std::filesystem;

// Symbolic links followed from the configured path to the cache directory itself.
constexpr int kMaxLinks = 8;

// A descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

Status unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }

Status errno_unavailable(std::string_view what, const fs::path& path, int error_number) {
  return unavailable(fmt::format("{} {}: {}", what, path.string(), std::strerror(error_number)));
}

std::int64_t mtime_ms(const struct stat& info) {
  return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000 + info.st_mtim.tv_nsec / 1000000;
}

// A directory between / and the cache: whoever owns it, or may write it without the sticky
// bit, can rename the cache directory away and put their own in its place.
Status check_parent(int fd, const fs::path& shown, uid_t owner) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return errno_unavailable("cannot stat", shown, errno);
  if (info.st_uid != 0 && info.st_uid != owner) {
    return unavailable(fmt::format(
        "directory {} above the cache is owned by uid {} (neither root nor this user, uid {}), "
        "who could replace the cache directory; refusing to load code from it",
        shown.string(), info.st_uid, owner));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (info.st_mode & S_ISVTX) == 0) {
    return unavailable(fmt::format(
        "directory {} above the cache is writable by group or others (mode {:o}) without the "
        "sticky bit, so they could replace the cache directory; refusing to load code from it",
        shown.string(), info.st_mode & 07777));
  }
  return Status::ok();
}

// The cache directory itself.
Status check_cache(int fd, const fs::path& shown, std::string_view via, uid_t owner) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return errno_unavailable("cannot stat", shown, errno);
  if (!S_ISDIR(info.st_mode)) {
    return unavailable(fmt::format("cache path {}{} is not a directory", shown.string(), via));
  }
  if (info.st_uid != owner) {
    return unavailable(fmt::format(
        "cache directory {}{} is owned by uid {}, not by this user (uid {}); refusing to load "
        "code from it",
        shown.string(), via, info.st_uid, owner));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return unavailable(fmt::format(
        "cache directory {}{} is writable by group or others (mode {:o}); refusing to load "
        "code from it (chmod 700 it to use it)",
        shown.string(), via, info.st_mode & 07777));
  }
  return Status::ok();
}

// Opens `parent` (absolute) one checked component at a time from /, never following a link;
// symbolic links in the part that exists are resolved first (realpath) so that a user's own
// layout (~/.cache pointing elsewhere) works, and the real directories are what is checked.
// Missing components are created (0755) when `create`.
Expected<Fd> open_parent(const fs::path& parent, uid_t owner, bool create) {
  fs::path existing = parent;
  std::vector<std::string> missing;
  for (;;) {
    struct stat info {};
    if (::stat(existing.c_str(), &info) == 0) break;
    if (errno != ENOENT) return errno_unavailable("cannot reach", existing, errno);
    if (!create) {
      return Status{StatusCode::kNotFound,
                    fmt::format("cache directory {}: no such directory", parent.string())};
    }
    missing.insert(missing.begin(), existing.filename().string());
    existing = existing.parent_path();
  }
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(existing.c_str(), nullptr),
                                                   &std::free);
  if (!real) return errno_unavailable("cannot resolve", existing, errno);

  Fd current(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.get() < 0) return errno_unavailable("cannot open", "/", errno);
  fs::path walked = "/";
  CONVJIT_RETURN_IF_ERROR(check_parent(current.get(), walked, owner));
  auto step = [&](const std::string& name, bool make) -> Status {
    if (make && ::mkdirat(current.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_unavailable("cannot create cache directory", walked / name, errno);
    }
    Fd next(::openat(current.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      // A link or a file where the check above saw a directory: it changed meanwhile.
      return errno_unavailable("cannot open (it changed while being checked?)", walked / name,
                               errno);
    }
    walked /= name;
    CONVJIT_RETURN_IF_ERROR(check_parent(next.get(), walked, owner));
    current = std::move(next);
    return Status::ok();
  };
  for (const fs::path& part : fs::path(real.get()).relative_path()) {
    CONVJIT_RETURN_IF_ERROR(step(part.string(), false));
  }
  for (const std::string& name : missing) CONVJIT_RETURN_IF_ERROR(step(name, true));
  return current;
}

Expected<Fd> open_dir(const fs::path& dir, uid_t owner, bool create, std::string via, int links) {
  const fs::path parent = dir.parent_path();
  const std::string name = dir.filename().string();
  Expected<Fd> parent_fd = open_parent(parent, owner, create);
  if (!parent_fd) return parent_fd.status();
  const int at = parent_fd->get();
  Fd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0 && errno == ENOENT) {
    if (!create) {
      return Status{StatusCode::kNotFound,
                    fmt::format("cache directory {}: no such directory", dir.string())};
    }
    if (::mkdirat(at, name.c_str(), 0700) != 0 && errno != EEXIST) {
      return errno_unavailable("cannot create cache directory", dir, errno);
    }
    fd = Fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (fd.get() < 0) {
    const int error_number = errno;
    struct stat link {};
    if (::fstatat(at, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) != 0) {
      return errno_unavailable("cannot open cache directory", dir, error_number);
    }
    if (!S_ISLNK(link.st_mode)) {
      if (!S_ISDIR(link.st_mode)) {
        return unavailable(fmt::format("cache path {}{} is not a directory", dir.string(), via));
      }
      return errno_unavailable("cannot open cache directory", dir, error_number);
    }
    // A link: ours (or root's) in a directory only we can change is as good as the place
    // it names, which must pass every check itself. Anyone else's link is refused.
    if (link.st_uid != 0 && link.st_uid != owner) {
      return unavailable(fmt::format("cache directory {} is a symlink owned by uid {}; refusing it",
                                     dir.string(), link.st_uid));
    }
    if (links >= kMaxLinks) {
      return unavailable(fmt::format("cache directory {}: too many symbolic links", dir.string()));
    }
    std::string target(PATH_MAX, '\0');
    const ssize_t length = ::readlinkat(at, name.c_str(), target.data(), target.size());
    if (length < 0) return errno_unavailable("cannot read the link", dir, errno);
    target.resize(static_cast<std::size_t>(length));
    fs::path next = fs::path(target).is_absolute() ? fs::path(target) : parent / target;
    next = next.lexically_normal();
    if (next.filename().empty()) next = next.parent_path();
    Expected<Fd> followed = open_dir(next, owner, false, " (through a symlink)", links + 1);
    if (!followed && followed.status().code() == StatusCode::kNotFound) {
      return unavailable(fmt::format("cache directory {} is a dangling link", dir.string()));
    }
    if (!followed) {
      // Name the configured path: that is what the user set.
      return Status(
          followed.status().code(),
          fmt::format("{} (configured as {})", followed.status().message(), dir.string()));
    }
    return followed;
  }
  CONVJIT_RETURN_IF_ERROR(check_cache(fd.get(), dir, via, owner));
  return fd;
}

}  // namespace

Expected<CacheDir> CacheDir::open(const fs::path& dir, uid_t owner_uid, bool create) {
  if (dir.empty()) return unavailable("empty cache directory path");
  std::error_code ec;
  fs::path absolute = dir.is_absolute() ? dir : fs::current_path(ec) / dir;
  if (ec) return unavailable(fmt::format("cannot resolve {}: {}", dir.string(), ec.message()));
  absolute = absolute.lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // a trailing slash
  if (absolute == absolute.root_path()) return unavailable("the cache directory cannot be /");
  Expected<Fd> fd = open_dir(absolute, owner_uid, create, "", 0);
  if (!fd) return fd.status();
  return CacheDir(fd->release(), dir);
}

CacheDir::CacheDir(CacheDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

CacheDir& CacheDir::operator=(CacheDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

CacheDir::~CacheDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<DirFile> CacheDir::list() const {
  std::vector<DirFile> files;
  // A descriptor of its own: readdir's position is per open file, and listings may run on
  // several threads at once.
  const int listing = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return files;
  DIR* dir = ::fdopendir(listing);
  if (dir == nullptr) {
    ::close(listing);
    return files;
  }
  while (const dirent* e = ::readdir(dir)) {
    struct stat info {};
    if (::fstatat(fd_, e->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(info.st_mode)) {
      continue;
    }
    files.push_back({e->d_name, static_cast<std::uint64_t>(info.st_size), mtime_ms(info)});
  }
  ::closedir(dir);
  return files;
}

CacheDir::Lock CacheDir::lock() const {
  const std::string name(kLockFileName);
  int fd = ::openat(fd_, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Lock(-1);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) break;  // e.g. a file system without locks: go on unlocked
  }
  return Lock(fd);
}

CacheDir::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace convjit::disk_cache
