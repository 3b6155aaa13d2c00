// What running x86 code needs besides the code bytes: the generated functions (entry offset,
// serial or split over the thread pool), the buffer table's layout (which slot is which
// tensor, where each scratch buffer lives in the per-run scratch block) and the kernel's
// name. Built from the nest at compile time; serialized as text next to the code in the disk
// cache, so a later process runs the stored code without lowering or generating anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.hpp"
#include "support/status.hpp"

namespace convjit::codegen::x86 {

/// One generated function.
struct FunctionEntry {
  std::size_t offset = 0;     // from the start of the code
  bool parallel = false;      // a top-level kParallel loop: run through the ParallelFor
  std::int64_t trip = 1;      // iterations to split (1 for serial statements)
  friend bool operator==(const FunctionEntry&, const FunctionEntry&) = default;
};

/// Scratch buffer `buffer` of the table lives at `offset` in the scratch block.
struct ScratchSlot {
  int buffer = 0;
  std::size_t offset = 0;
  std::size_t bytes = 0;
  friend bool operator==(const ScratchSlot&, const ScratchSlot&) = default;
};

/// Alignment of every scratch buffer (a full zmm line).
inline constexpr std::size_t kScratchAlign = 64;

struct KernelLayout {
  std::string name;                      // the kernel's self-describing name, one token
  std::string isa;                       // cpu::CpuInfo::name() the code was generated for
  std::size_t code_size = 0;             // bytes, constant pool included
  std::vector<ir::BufferKind> buffers;   // kind of each slot of the buffer table
  std::vector<ScratchSlot> scratch;
  std::size_t scratch_bytes = 0;         // the whole block, each slot rounded to kScratchAlign
  std::vector<FunctionEntry> functions;  // run in order
  friend bool operator==(const KernelLayout&, const KernelLayout&) = default;
};

/// The layout of code generated from `nest`.
KernelLayout make_layout(const ir::LoopNest& nest, std::vector<FunctionEntry> functions,
                         std::string name, std::string isa, std::size_t code_size);

/// A few lines of text ("convjit-x86-kernel 1" then one fact per line).
std::string serialize_layout(const KernelLayout& layout);

/// Parses serialize_layout()'s text and checks it is self-consistent (every function inside
/// the code, every scratch slot inside the block, one entry per buffer). The disk cache has
/// already verified the bytes' checksum; this refuses anything a bug or another format could
/// have produced before it gets near a call.
Expected<KernelLayout> parse_layout(std::string_view text);

}  // namespace convjit::codegen::x86
