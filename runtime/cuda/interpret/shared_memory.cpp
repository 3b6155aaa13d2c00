#include "runtime/cuda/interpret/shared_memory.hpp"

#include <fmt/format.h>

namespace convjit::runtime::interpret {

SharedMemory::SharedMemory() : arena_(kMaxStaticSharedBytes), shadow_(kMaxStaticSharedBytes) {}

void SharedMemory::begin_block() {
  arrays_.clear();
  used_ = 0;
  ++block_;
  interval_ = 0;
}

std::byte* SharedMemory::declare(std::size_t index, std::size_t bytes, std::size_t align,
                                 const char* name, std::string* error) {
  if (index < arrays_.size()) {
    const Array& a = arrays_[index];
    if (a.bytes != bytes || a.name != name) {
      *error = fmt::format(
          "__shared__ array {} is declared as {} ({} bytes) by one thread and as "
          "{} ({} bytes) by another",
          index, a.name, a.bytes, name, bytes);
      return nullptr;
    }
    return arena_.data() + a.offset;
  }
  if (index != arrays_.size()) {
    *error = "__shared__ arrays declared out of order";
    return nullptr;
  }
  const std::size_t offset = (used_ + align - 1) / align * align;
  if (offset + bytes > kMaxStaticSharedBytes) {
    *error = fmt::format(
        "__shared__ array {} of {} bytes takes the block past the {} bytes of "
        "static shared memory",
        name, bytes, kMaxStaticSharedBytes);
    return nullptr;
  }
  arrays_.push_back({offset, bytes, name});
  used_ = offset + bytes;
  return arena_.data() + offset;
}

const SharedMemory::Array* SharedMemory::find(const void* pointer) const {
  const auto* p = static_cast<const std::byte*>(pointer);
  if (p < arena_.data() || p >= arena_.data() + arena_.size()) return nullptr;
  const std::size_t offset = static_cast<std::size_t>(p - arena_.data());
  for (const Array& a : arrays_) {
    if (offset >= a.offset && offset < a.offset + a.bytes) return &a;
  }
  return nullptr;
}

std::string SharedMemory::record(std::size_t offset, std::size_t bytes, bool is_write, int thread,
                                 int line, const std::string& (*thread_name)(int, void*),
                                 void* context) {
  const std::uint64_t now = epoch();
  std::string problem;
  for (std::size_t i = offset; i < offset + bytes; ++i) {
    ByteShadow& s = shadow_[i];
    if (problem.empty()) {
      if (is_write) {
        if (s.write_epoch == now && s.writer != thread) {
          problem = fmt::format(
              "shared-memory race: written by thread {} (line {}) and again by "
              "this thread with no __syncthreads() between",
              thread_name(s.writer, context), s.write_line);
        } else if (s.read_epoch == now && s.reader != thread && s.reader != kNoThread) {
          problem = fmt::format(
              "shared-memory race: read by {} (line {}) and written by this thread with no "
              "__syncthreads() between",
              s.reader == kManyThreads ? std::string("several threads")
                                       : "thread " + thread_name(s.reader, context),
              s.read_line);
        }
      } else {
        if (s.init_block != block_) {
          problem = "read of uninitialised shared memory (no thread of this block wrote it)";
        } else if (s.write_epoch == now && s.writer != thread) {
          problem = fmt::format(
              "shared-memory race: written by thread {} (line {}) and read by "
              "this thread with no __syncthreads() between",
              thread_name(s.writer, context), s.write_line);
        }
      }
    }
    if (is_write) {
      s.write_epoch = now;
      s.writer = thread;
      s.write_line = line;
      s.init_block = block_;
    } else if (s.read_epoch != now) {
      s.read_epoch = now;
      s.reader = thread;
      s.read_line = line;
    } else if (s.reader != thread) {
      s.reader = kManyThreads;
    }
  }
  if (!problem.empty()) {
    const Array* a = find(arena_.data() + offset);
    if (a != nullptr) {
      problem += fmt::format(" ({} byte{} at offset {} of {}, {} bytes)", bytes,
                             bytes == 1 ? "" : "s", offset - a->offset, a->name, a->bytes);
    }
  }
  return problem;
}

}  // namespace convjit::runtime::interpret
