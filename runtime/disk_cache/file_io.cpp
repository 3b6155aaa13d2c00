#include "runtime/disk_cache/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace convjit::disk_cache {
namespace {

std::atomic<int> g_write_fault{0};
std::atomic<int> g_remove_fault{0};
std::atomic<std::uint64_t> g_space{0};
constexpr std::string_view kTempPrefix = ".tmp-";

Status errno_status(int error_number, std::string_view what, const std::filesystem::path& path) {
  const bool full = error_number == ENOSPC || error_number == EDQUOT;
  StatusCode code = error_number == ENOENT ? StatusCode::kNotFound
                    : full                 ? StatusCode::kResourceExhausted
                                           : StatusCode::kUnavailable;
  return {code, fmt::format("{} {}: {}", what, path.string(), std::strerror(error_number))};
}

// Unique per process, thread and call, so concurrent writers never share a temp file.
std::string temp_name(const std::filesystem::path& target) {
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("{}{}-{}-{}", kTempPrefix, ::getpid(), counter.fetch_add(1),
                     target.filename().string());
}

}  // namespace

void set_write_fault_for_testing(int error_number) { g_write_fault.store(error_number); }
void set_remove_fault_for_testing(int error_number) { g_remove_fault.store(error_number); }
void set_space_for_testing(std::uint64_t bytes) { g_space.store(bytes); }

bool is_temp_file_name(std::string_view file_name) { return file_name.starts_with(kTempPrefix); }

Expected<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "cannot open", path);
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      return errno_status(saved, "cannot read", path);
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + got);
  }
  ::close(fd);
  return bytes;
}

Status write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  if (int fault = g_write_fault.load(); fault != 0) return errno_status(fault, "cannot write", path);
  std::filesystem::path temp = path.parent_path() / temp_name(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status(errno, "cannot create", temp);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return errno_status(saved, "cannot write", temp);
    }
    done += static_cast<std::size_t>(put);
  }
  // close() can report a delayed ENOSPC (e.g. on NFS); a file that failed to close is not renamed.
  if (::close(fd) != 0) {
    int saved = errno;
    ::unlink(temp.c_str());
    return errno_status(saved, "cannot write", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temp.c_str());
    return errno_status(saved, "cannot rename into", path);
  }
  return Status::ok();
}

namespace {

// Reads everything from `fd` and closes it.
Expected<std::vector<std::uint8_t>> read_all(int fd, const std::filesystem::path& shown) {
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      return errno_status(saved, "cannot read", shown);
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + got);
  }
  ::close(fd);
  return bytes;
}

// Bytes of the regular files in the directory (the full-disk test seam).
std::uint64_t directory_bytes(int dir_fd) {
  std::uint64_t total = 0;
  const int listing = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return 0;
  DIR* dir = ::fdopendir(listing);
  if (dir == nullptr) {
    ::close(listing);
    return 0;
  }
  while (const dirent* e = ::readdir(dir)) {
    struct stat info {};
    if (::fstatat(dir_fd, e->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(info.st_mode)) {
      total += static_cast<std::uint64_t>(info.st_size);
    }
  }
  ::closedir(dir);
  return total;
}

}  // namespace

Expected<std::vector<std::uint8_t>> read_file_at(int dir_fd, std::string_view name) {
  const std::string file(name);
  const int fd = ::openat(dir_fd, file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "cannot open", file);
  return read_all(fd, file);
}

Status write_file_atomic_at(int dir_fd, std::string_view name,
                            std::span<const std::uint8_t> bytes) {
  const std::string file(name);
  if (int fault = g_write_fault.load(); fault != 0) {
    return errno_status(fault, "cannot write", file);
  }
  if (const std::uint64_t space = g_space.load();
      space != 0 && directory_bytes(dir_fd) + bytes.size() > space) {
    return errno_status(ENOSPC, "cannot write", file);
  }
  const std::string temp = temp_name(file);
  int fd =
      ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status(errno, "cannot create", temp);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      ::unlinkat(dir_fd, temp.c_str(), 0);
      return errno_status(saved, "cannot write", temp);
    }
    done += static_cast<std::size_t>(put);
  }
  if (::close(fd) != 0) {
    int saved = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    return errno_status(saved, "cannot write", temp);
  }
  if (::renameat(dir_fd, temp.c_str(), dir_fd, file.c_str()) != 0) {
    int saved = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    return errno_status(saved, "cannot rename into", file);
  }
  return Status::ok();
}

Status write_file_atomic_at(int dir_fd, std::string_view name, std::string_view text) {
  return write_file_atomic_at(
      dir_fd, name, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

Status remove_file_at(int dir_fd, std::string_view name) {
  const std::string file(name);
  if (int fault = g_remove_fault.load(); fault != 0) {
    return errno_status(fault, "cannot remove", file);
  }
  if (::unlinkat(dir_fd, file.c_str(), 0) != 0) return errno_status(errno, "cannot remove", file);
  return Status::ok();
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view text) {
  return write_file_atomic(
      path, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace convjit::disk_cache
