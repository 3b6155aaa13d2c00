// One block's __shared__ memory in the interpret mode: the arrays the kernel declares, carved
// from an arena in declaration order, and a shadow of every byte for the checks a GPU run cannot
// give cheaply: bounds (per array), races (a byte written by one thread and read or written by
// another within one barrier interval) and reads of bytes no thread has written in this block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace convjit::runtime::interpret {

/// Static shared memory a CUDA block may declare.
inline constexpr std::size_t kMaxStaticSharedBytes = 48 * 1024;

class SharedMemory {
 public:
  SharedMemory();

  struct Array {
    std::size_t offset = 0, bytes = 0;
    std::string name;
  };

  /// Starts a new block: no arrays, every byte uninitialised, interval 0.
  void begin_block();
  /// The next barrier interval (after a __syncthreads()).
  void next_interval() { ++interval_; }

  /// Array number `index` of the block: the first thread to declare it creates it (nullptr
  /// with *error set when it would exceed kMaxStaticSharedBytes); later threads must declare
  /// the same size and name (else *error says how they differ).
  std::byte* declare(std::size_t index, std::size_t bytes, std::size_t align, const char* name,
                     std::string* error);

  /// The array holding `pointer`, or nullptr.
  const Array* find(const void* pointer) const;
  std::size_t offset_of(const void* pointer) const {
    return static_cast<std::size_t>(static_cast<const std::byte*>(pointer) - arena_.data());
  }

  /// Records an access of [offset, offset + bytes) by `thread` at `line`; returns a race or
  /// uninitialised-read description (empty when the access is clean). Bounds are the caller's.
  std::string record(std::size_t offset, std::size_t bytes, bool is_write, int thread, int line,
                     const std::string& (*thread_name)(int thread, void* context), void* context);

 private:
  static constexpr std::int32_t kNoThread = -1;
  static constexpr std::int32_t kManyThreads = -2;
  struct ByteShadow {
    std::uint64_t write_epoch = 0, read_epoch = 0, init_block = 0;
    std::int32_t writer = kNoThread, reader = kNoThread;
    std::int32_t write_line = 0, read_line = 0;
  };
  std::uint64_t epoch() const { return (block_ << 32) | interval_; }

  std::vector<std::byte> arena_;
  std::vector<ByteShadow> shadow_;
  std::vector<Array> arrays_;
  std::size_t used_ = 0;
  std::uint64_t block_ = 0;  // 1-based serial of the block being run (0 = never written)
  std::uint64_t interval_ = 0;
};

}  // namespace convjit::runtime::interpret
