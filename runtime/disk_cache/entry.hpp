// One disk cache entry: its metadata (JSON) and its artifacts (x86 code, its load info,
// scheduled IR text).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/status.hpp"

namespace convjit::disk_cache {

/// Bumped whenever the on-disk layout changes; entries of another format are dropped.
inline constexpr int kFormatVersion = 1;

/// Artifact names the runtime stores (file extensions on disk).
inline constexpr const char* kCodeArtifact = "code";
inline constexpr const char* kIrArtifact = "ir";
/// The backend's plan for the kernel (Plan::describe()), one line.
inline constexpr const char* kPlanArtifact = "plan";
/// Backend::load()'s second input (CompiledCode::load_info()): with the code, enough to run
/// the kernel without generating it again.
inline constexpr const char* kLoadInfoArtifact = "load";

/// Where one artifact lives and how to recognise it intact.
struct ArtifactRecord {
  std::string file;       // file name inside the cache directory
  std::uint64_t size = 0;
  std::string checksum;   // XXH3-128 hex of the bytes
};

/// Everything `convjit cache` shows about an entry without reading its artifacts.
struct EntryMeta {
  int format = kFormatVersion;
  std::string key;           // the full cache key text; compared on lookup, not only its hash
  std::string key_hash;      // hash128(key).hex(): the entry's file names
  std::string descriptor;    // canonical descriptor text (what `repro` rebuilds)
  std::string problem;       // canonical problem text
  std::string op;            // TensorFlow op name
  std::string dtype;
  std::string layout;
  std::string shape;         // short human summary, e.g. "N1 28x28x64 k3x3 oc32 s2"
  std::string backend;       // "x86", ...
  std::string isa;           // target name, e.g. "avx512+bf16"
  std::string library_version;
  std::string codegen_version;
  std::string kernel_name;   // with its blocking
  double compile_ms = 0;
  std::uint64_t code_size = 0;
  std::int64_t created_ms = 0;    // Unix time, milliseconds
  std::int64_t last_used_ms = 0;
  std::uint64_t hits = 0;         // disk hits recorded (racing processes may lose a count)
  std::uint64_t compiles = 0;     // compilations stored under this key (the misses)
  std::map<std::string, ArtifactRecord> artifacts;
};

/// An entry with its artifact bytes loaded and verified.
struct Entry {
  EntryMeta meta;
  std::map<std::string, std::vector<std::uint8_t>> artifacts;

  /// The artifact's bytes, or an empty vector when the entry has none of that name.
  const std::vector<std::uint8_t>& artifact(const std::string& name) const;
};

/// Serialises metadata as pretty JSON (one file per entry).
std::string meta_to_json(const EntryMeta& meta);
/// Parses metadata; an error names what is missing or malformed (the file is then dropped).
Expected<EntryMeta> meta_from_json(std::string_view text);

/// File names of an entry's parts: "<hash>.json" and "<hash>-<checksum prefix>.<artifact>".
/// Artifact files carry their checksum so that two processes storing the same key never mix
/// one's metadata with the other's code.
std::string meta_file_name(std::string_view key_hash);
std::string artifact_file_name(std::string_view key_hash, std::string_view artifact,
                               std::string_view checksum);

/// Milliseconds since the Unix epoch.
std::int64_t now_unix_ms();

}  // namespace convjit::disk_cache
