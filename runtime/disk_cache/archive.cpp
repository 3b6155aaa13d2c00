#include "runtime/disk_cache/archive.hpp"

#include <cstring>

#include <fmt/format.h>

#include "frontend/hash.hpp"
#include "codegen/cpu/cpu_info.hpp"
#include "runtime/disk_cache/file_io.hpp"

namespace convjit::disk_cache {
namespace {

// Layout: magic, entry count, then per entry: metadata JSON, artifact count, and per artifact
// its name and bytes. Every length is a little-endian u64 before its bytes.
constexpr std::string_view kMagic = "convjit-cache-archive-1\n";

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_bytes(std::vector<std::uint8_t>& out, const void* data, std::size_t size) {
  put_u64(out, size);
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + size);
}

class Reader {
 public:
  explicit Reader(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  bool u64(std::uint64_t* v) {
    if (bytes_.size() - pos_ < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<std::uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return true;
  }
  bool bytes(std::vector<std::uint8_t>* out) {
    std::uint64_t size = 0;
    if (!u64(&size) || bytes_.size() - pos_ < size) return false;
    out->assign(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + size));
    pos_ += size;
    return true;
  }
  bool text(std::string* out) {
    std::vector<std::uint8_t> raw;
    if (!bytes(&raw)) return false;
    out->assign(raw.begin(), raw.end());
    return true;
  }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  const std::vector<std::uint8_t>& bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

Status write_archive(const std::filesystem::path& path, const std::vector<Entry>& entries) {
  std::vector<std::uint8_t> out(kMagic.begin(), kMagic.end());
  put_u64(out, entries.size());
  for (const Entry& entry : entries) {
    std::string meta = meta_to_json(entry.meta);
    put_bytes(out, meta.data(), meta.size());
    put_u64(out, entry.artifacts.size());
    for (const auto& [name, bytes] : entry.artifacts) {
      put_bytes(out, name.data(), name.size());
      put_bytes(out, bytes.data(), bytes.size());
    }
  }
  return write_file_atomic(path.parent_path().empty() ? std::filesystem::path(".") / path : path,
                           out);
}

Expected<std::vector<Entry>> read_archive(const std::filesystem::path& path) {
  Expected<std::vector<std::uint8_t>> bytes = read_file(path);
  if (!bytes) return bytes.status();
  if (bytes->size() < kMagic.size() ||
      std::memcmp(bytes->data(), kMagic.data(), kMagic.size()) != 0) {
    return invalid_argument(fmt::format("{} is not a convjit cache archive", path.string()));
  }
  std::vector<std::uint8_t> body(bytes->begin() + static_cast<std::ptrdiff_t>(kMagic.size()),
                                 bytes->end());
  Reader reader(body);
  auto damaged = [&](std::string_view what) {
    return invalid_argument(fmt::format("archive {} is damaged: {}", path.string(), what));
  };
  std::uint64_t count = 0;
  if (!reader.u64(&count)) return damaged("no entry count");
  std::vector<Entry> entries;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string meta_text;
    std::uint64_t artifacts = 0;
    if (!reader.text(&meta_text) || !reader.u64(&artifacts)) return damaged("truncated entry");
    Expected<EntryMeta> meta = meta_from_json(meta_text);
    if (!meta) return damaged(meta.status().message());
    Entry entry;
    entry.meta = std::move(*meta);
    for (std::uint64_t a = 0; a < artifacts; ++a) {
      std::string name;
      std::vector<std::uint8_t> data;
      if (!reader.text(&name) || !reader.bytes(&data)) return damaged("truncated artifact");
      auto record = entry.meta.artifacts.find(name);
      std::string checksum =
          hash128(std::string_view(reinterpret_cast<const char*>(data.data()), data.size())).hex();
      if (record == entry.meta.artifacts.end() || record->second.checksum != checksum) {
        return damaged(fmt::format("artifact '{}' of entry {} fails its checksum", name,
                                   entry.meta.key_hash.substr(0, 12)));
      }
      entry.artifacts.emplace(std::move(name), std::move(data));
    }
    if (entry.artifacts.size() != entry.meta.artifacts.size()) {
      return damaged(fmt::format("entry {} lacks artifacts", entry.meta.key_hash.substr(0, 12)));
    }
    entries.push_back(std::move(entry));
  }
  if (!reader.at_end()) return damaged("trailing bytes");
  return entries;
}

std::set<std::string> runnable_target_names() {
  return {cpu::CpuInfo::host(cpu::Isa::kAvx512).name(), cpu::CpuInfo::host(cpu::Isa::kAvx2).name(),
          cpu::CpuInfo::generic().name()};
}

}  // namespace convjit::disk_cache
