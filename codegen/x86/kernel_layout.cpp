#include "codegen/x86/kernel_layout.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace convjit::codegen::x86 {
namespace {

constexpr std::string_view kMagic = "convjit-x86-kernel";
constexpr int kLayoutVersion = 1;
// Far beyond any kernel; keeps the arithmetic below free of overflow.
constexpr std::size_t kMaxCodeSize = std::size_t{1} << 32;
constexpr std::size_t kMaxScratchBytes = std::size_t{1} << 44;

std::string_view kind_name(ir::BufferKind kind) {
  switch (kind) {
    case ir::BufferKind::kX: return "x";
    case ir::BufferKind::kW: return "w";
    case ir::BufferKind::kY: return "y";
    case ir::BufferKind::kScratch: return "scratch";
  }
  return "?";
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

template <typename T>
bool parse_number(std::string_view word, T* out) {
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *out);
  return error == std::errc() && end == word.data() + word.size();
}

Status bad(std::string_view what, std::string_view line) {
  return invalid_argument(fmt::format("x86 kernel layout: {} in line '{}'", what, line));
}

}  // namespace

namespace {

constexpr std::size_t kPage = 4096;
// A multiple of kScratchAlign that cycles through 64 different page offsets.
constexpr std::size_t kSlotStagger = 17 * kScratchAlign;

}  // namespace

KernelLayout make_layout(const ir::LoopNest& nest, std::vector<FunctionEntry> functions,
                         std::string name, std::string isa, std::size_t code_size) {
  KernelLayout layout;
  layout.name = std::move(name);
  layout.isa = std::move(isa);
  layout.code_size = code_size;
  layout.functions = std::move(functions);
  layout.buffers.reserve(nest.buffers.size());
  for (std::size_t i = 0; i < nest.buffers.size(); ++i) {
    const ir::Buffer& b = nest.buffers[i];
    layout.buffers.push_back(b.kind);
    if (b.kind != ir::BufferKind::kScratch) continue;
    const auto bytes = static_cast<std::size_t>(b.elements()) * dtype_size(b.dtype);
    // Each slot starts at a different offset within a 4 KiB page: scratches whose sizes are
    // multiples of 4 KiB (activation copies) would otherwise put element k of one at the same
    // page offset as element k of the next, and a tile storing to one while loading from the
    // other stalls on 4K aliasing.
    const std::size_t slot = layout.scratch.size();
    std::size_t offset = (layout.scratch_bytes + kPage - 1) / kPage * kPage;
    if (slot > 0) offset += (slot * kSlotStagger) % kPage;
    layout.scratch.push_back({static_cast<int>(i), offset, bytes});
    layout.scratch_bytes = offset + (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  }
  return layout;
}

std::string serialize_layout(const KernelLayout& layout) {
  std::string text = fmt::format("{} {}\nname {}\nisa {}\ncode_size {}\nscratch_bytes {}\n",
                                 kMagic, kLayoutVersion, layout.name, layout.isa,
                                 layout.code_size, layout.scratch_bytes);
  std::size_t next_scratch = 0;
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    text += fmt::format("buffer {}", kind_name(layout.buffers[i]));
    if (next_scratch < layout.scratch.size() &&
        layout.scratch[next_scratch].buffer == static_cast<int>(i)) {
      const ScratchSlot& s = layout.scratch[next_scratch++];
      text += fmt::format(" {} {}", s.offset, s.bytes);
    }
    text += "\n";
  }
  for (const FunctionEntry& f : layout.functions) {
    text += fmt::format("function {} {} {}\n", f.offset, f.parallel ? "parallel" : "serial",
                        f.trip);
  }
  return text;
}

Expected<KernelLayout> parse_layout(std::string_view text) {
  KernelLayout layout;
  bool have_magic = false, have_name = false, have_isa = false, have_code = false,
       have_scratch = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::vector<std::string_view> w = split_words(line);
    if (w.empty()) continue;
    if (!have_magic) {
      int version = 0;
      if (w.size() != 2 || w[0] != kMagic || !parse_number(w[1], &version)) {
        return bad("not an x86 kernel layout", line);
      }
      if (version != kLayoutVersion) return bad("unknown layout version", line);
      have_magic = true;
    } else if (w[0] == "name" && w.size() == 2) {
      layout.name = std::string(w[1]);
      have_name = true;
    } else if (w[0] == "isa" && w.size() == 2) {
      layout.isa = std::string(w[1]);
      have_isa = true;
    } else if (w[0] == "code_size" && w.size() == 2) {
      if (!parse_number(w[1], &layout.code_size) || layout.code_size == 0 ||
          layout.code_size > kMaxCodeSize) {
        return bad("bad code size", line);
      }
      have_code = true;
    } else if (w[0] == "scratch_bytes" && w.size() == 2) {
      if (!parse_number(w[1], &layout.scratch_bytes) || layout.scratch_bytes > kMaxScratchBytes) {
        return bad("bad scratch size", line);
      }
      have_scratch = true;
    } else if (w[0] == "buffer" && (w.size() == 2 || w.size() == 4)) {
      const int index = static_cast<int>(layout.buffers.size());
      if (w[1] == "x" && w.size() == 2) {
        layout.buffers.push_back(ir::BufferKind::kX);
      } else if (w[1] == "w" && w.size() == 2) {
        layout.buffers.push_back(ir::BufferKind::kW);
      } else if (w[1] == "y" && w.size() == 2) {
        layout.buffers.push_back(ir::BufferKind::kY);
      } else if (w[1] == "scratch" && w.size() == 4) {
        ScratchSlot s;
        s.buffer = index;
        if (!have_scratch || !parse_number(w[2], &s.offset) || !parse_number(w[3], &s.bytes) ||
            s.offset % kScratchAlign != 0 || s.offset > layout.scratch_bytes ||
            s.bytes > layout.scratch_bytes - s.offset) {
          return bad("scratch slot outside the scratch block", line);
        }
        layout.buffers.push_back(ir::BufferKind::kScratch);
        layout.scratch.push_back(s);
      } else {
        return bad("unknown buffer", line);
      }
    } else if (w[0] == "function" && w.size() == 4) {
      FunctionEntry f;
      if (!have_code || !parse_number(w[1], &f.offset) || f.offset >= layout.code_size ||
          !parse_number(w[3], &f.trip) || f.trip < 0 ||
          (w[2] != "parallel" && w[2] != "serial")) {
        return bad("bad function entry", line);
      }
      f.parallel = w[2] == "parallel";
      if (!f.parallel && f.trip != 1) return bad("serial function with a trip count", line);
      layout.functions.push_back(f);
    } else {
      return bad("unknown field", line);
    }
  }
  if (!have_magic || !have_name || !have_isa || !have_code || !have_scratch) {
    return invalid_argument("x86 kernel layout: a required field is missing");
  }
  if (layout.functions.empty()) return invalid_argument("x86 kernel layout: no functions");
  if (layout.buffers.empty()) return invalid_argument("x86 kernel layout: no buffers");
  return layout;
}

}  // namespace convjit::codegen::x86
