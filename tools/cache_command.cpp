#include "tools/cache_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "convjit/numeric.hpp"
#include "convjit/convjit.hpp"
#include "runtime/disk_cache/archive.hpp"
#include "runtime/disk_cache/cache_stats.hpp"
#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/location.hpp"
#include "tools/cache_entry_check.hpp"
#include "tools/cache_format.hpp"
#include "tools/cli_args.hpp"
#include "tools/cuda_entry_view.hpp"
#include "tools/disassembler.hpp"

namespace convjit::cli {
namespace {

namespace dc = convjit::disk_cache;
using Json = nlohmann::ordered_json;

constexpr std::string_view kUsage =
    "usage: convjit cache <subcommand> [flags]\n"
    "\n"
    "subcommands:\n"
    "  list              one line per entry (filters: --op --dtype --backend --isa; --json)\n"
    "  show KEY          descriptor, kernel, scheduled IR and disassembly of one entry\n"
    "  stats             entries, bytes, hits and misses, compile-time percentiles\n"
    "  verify [--run]    check every entry's integrity; --run also runs each kernel against\n"
    "                    the naive reference\n"
    "  purge             remove entries: --all, --older-than DURATION, --max-bytes N, or filters\n"
    "  export FILE       write entries (filters apply) to a single-file archive\n"
    "  import FILE       add an archive's entries (other ISAs or versions are skipped)\n"
    "  repro KEY         print the `convjit run` command that rebuilds and checks the kernel\n"
    "\n"
    "KEY is any unique prefix of an entry's hash, as `list` shows it. The cache directory is\n"
    "$CONVJIT_CACHE_DIR, else $XDG_CACHE_HOME/convjit, else ~/.cache/convjit.\n"
    "Exit status: 0 ok, 1 a failure was found, 2 usage error. `convjit cache SUB --help` for more.\n";

constexpr FlagSpec kFilterFlags[] = {
    {"op", "NAME", "only entries of this op (TensorFlow or Python name)"},
    {"dtype", "TYPE", "only entries of this dtype (float32, bfloat16, ...)"},
    {"backend", "NAME", "only entries of this backend (x86, interpreter)"},
    {"isa", "NAME", "only entries for this target (avx512, avx2, ...)"},
};

struct Io {
  std::ostream& out;
  std::ostream& err;
};

// ---- opening the cache

// Opens the configured directory; nullptr with the exit status in *status when there is
// nothing to inspect (off, missing: 0) or it is refused (1).
std::unique_ptr<dc::DiskCache> open_cache(const Io& io, bool create, int* status) {
  std::optional<std::filesystem::path> dir = dc::configured_cache_dir();
  if (!dir) {
    fmt::print(io.out, "the disk cache is off (CONVJIT_CACHE_DIR=off, or no HOME to place it in)\n");
    *status = kExitOk;
    return nullptr;
  }
  dc::OpenOptions options;
  options.create = create;
  options.max_bytes = dc::DiskCache::configured_max_bytes();
  Expected<std::unique_ptr<dc::DiskCache>> cache = dc::DiskCache::open(*dir, options);
  if (cache) return std::move(*cache);
  if (cache.status().code() == StatusCode::kNotFound) {
    fmt::print(io.out, "no disk cache at {} yet: nothing has been compiled with it on\n",
               dir->string());
    *status = kExitOk;
  } else {
    fmt::print(io.err, "convjit cache: cannot use {}: {}\n", dir->string(), cache.status().message());
    *status = kExitFailure;
  }
  return nullptr;
}

// ---- filters

struct Filter {
  std::optional<std::string> op, dtype, backend, isa;
  bool empty() const { return !op && !dtype && !backend && !isa; }
  bool matches(const dc::EntryMeta& m) const {
    if (op) {
      bool any = lower(m.op) == lower(*op);
      for (int k = 0; k <= static_cast<int>(OpKind::kDepthwiseConv2dNativeBackpropFilter); ++k) {
        auto kind = static_cast<OpKind>(k);
        if (op_name(kind) == m.op && op_python_name(kind) == *op) any = true;
      }
      if (!any) return false;
    }
    if (dtype && lower(m.dtype) != lower(*dtype)) return false;
    if (backend && lower(m.backend) != lower(*backend)) return false;
    if (isa && lower(m.isa) != lower(*isa) && !lower(m.isa).starts_with(lower(*isa) + "+")) return false;
    return true;
  }
};

Filter read_filter(const ParsedFlags& flags) {
  return Filter{flags.get("op"), flags.get("dtype"), flags.get("backend"), flags.get("isa")};
}

std::vector<FlagSpec> with_filters(std::initializer_list<FlagSpec> own) {
  std::vector<FlagSpec> specs(own);
  specs.insert(specs.end(), std::begin(kFilterFlags), std::end(kFilterFlags));
  specs.push_back({"help", "", "show this help"});
  return specs;
}

Json meta_json(const dc::EntryMeta& m) {
  return Json::parse(dc::meta_to_json(m));
}

// ---- list

int list_entries(const ParsedFlags& flags, const Io& io) {
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status;
  Filter filter = read_filter(flags);
  dc::Scan scan = cache->scan();
  std::sort(scan.entries.begin(), scan.entries.end(),
            [](const auto& a, const auto& b) { return a.mtime_ms > b.mtime_ms; });
  std::int64_t now = dc::now_unix_ms();
  if (flags.has("json")) {
    Json list = Json::array();
    for (const dc::ScannedEntry& e : scan.entries) {
      if (!e.meta) {
        if (filter.empty()) list.push_back({{"key_hash", e.key_hash}, {"damaged", e.problem}, {"bytes", e.bytes}});
        continue;
      }
      if (!filter.matches(*e.meta)) continue;
      Json j = meta_json(*e.meta);
      j["bytes"] = e.bytes;
      j["age_s"] = (now - e.meta->created_ms) / 1000;
      list.push_back(std::move(j));
    }
    fmt::print(io.out, "{}\n", list.dump(2));
    return kExitOk;
  }
  if (scan.entries.empty()) {
    fmt::print(io.out, "the disk cache at {} is empty\n", cache->dir().string());
    return kExitOk;
  }
  // Target names carry tuning facts ("avx2+f16c/fma1/l2=512k"): room for the longest usual one.
  fmt::print(
      io.out, "{:<12}  {:<36}  {:<8}  {:<6}  {:<28}  {:<11}  {:<24}  {:>9}  {:>10}  {:>5}  {:>5}\n",
      "KEY", "OP", "DTYPE", "LAYOUT", "SHAPE", "BACKEND", "ISA", "SIZE", "COMPILE", "HITS", "AGE");
  std::size_t shown = 0;
  for (const dc::ScannedEntry& e : scan.entries) {
    if (!e.meta) {
      if (filter.empty()) fmt::print(io.out, "{:<12}  (damaged metadata: {})\n", e.key_hash.substr(0, 12), e.problem);
      continue;
    }
    const dc::EntryMeta& m = *e.meta;
    if (!filter.matches(m)) continue;
    ++shown;
    fmt::print(
        io.out,
        "{:<12}  {:<36}  {:<8}  {:<6}  {:<28}  {:<11}  {:<24}  {:>9}  {:>7.2f} ms  {:>5}  {:>5}\n",
        e.key_hash.substr(0, 12), m.op, m.dtype, m.layout, m.shape, m.backend, m.isa,
        human_bytes(e.bytes), m.compile_ms, m.hits, human_age(now - m.created_ms));
  }
  fmt::print(io.out, "{} of {} entries, {} in {}\n", shown, scan.entries.size(),
             human_bytes(scan.total_bytes), cache->dir().string());
  return kExitOk;
}

// ---- show / repro

Expected<dc::Entry> load_by_prefix(dc::DiskCache& cache, std::string_view prefix) {
  Expected<std::string> hash = cache.resolve_prefix(prefix);
  if (!hash) return hash.status();
  return cache.load(*hash, false);
}

std::string key_field(const std::string& key, std::string_view name) {
  std::string prefix = std::string(name) + "=";
  std::size_t at = 0;
  while (at < key.size()) {
    std::size_t end = key.find('\n', at);
    if (end == std::string::npos) end = key.size();
    std::string_view line(key.data() + at, end - at);
    if (line.starts_with(prefix)) return std::string(line.substr(prefix.size()));
    at = end + 1;
  }
  return "";
}

std::string shell_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string repro_line(const dc::EntryMeta& m) {
  std::string env;
  if (m.isa.starts_with("avx2")) env += "CONVJIT_ISA=avx2 ";
  std::string line = fmt::format("{}convjit run --desc {} --backend {}", env, shell_quote(m.descriptor), m.backend);
  if (std::string device = device_for_entry(m.backend, m.isa); !device.empty()) line += " --device " + device;
  std::string threads = key_field(m.key, "threads");
  if (!threads.empty()) line += " --threads " + threads;
  return line + " --check";
}

int show_entry(std::string_view prefix, const ParsedFlags& flags, const Io& io, bool repro) {
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status == kExitOk ? kExitFailure : status;
  Expected<dc::Entry> entry = load_by_prefix(*cache, prefix);
  if (!entry) {
    fmt::print(io.err, "convjit cache: {}\n", entry.status().message());
    return kExitFailure;
  }
  const dc::EntryMeta& m = entry->meta;
  if (repro) {
    fmt::print(io.out, "{}\n", repro_line(m));
    return kExitOk;
  }
  const auto& code = entry->artifact(dc::kCodeArtifact);
  const auto& ir = entry->artifact(dc::kIrArtifact);
  std::string ir_text(ir.begin(), ir.end());
  std::string disasm;
  if (!flags.has("no-disasm") && !code.empty()) disasm = disassemble_x86_64(code);
  if (auto file = flags.get("code-file")) {
    std::FILE* f = std::fopen(file->c_str(), "wb");
    if (f == nullptr || std::fwrite(code.data(), 1, code.size(), f) != code.size()) {
      fmt::print(io.err, "convjit cache: cannot write {}: {}\n", *file, std::strerror(errno));
      if (f) std::fclose(f);
      return kExitFailure;
    }
    std::fclose(f);
  }
  if (flags.has("json")) {
    Json j = meta_json(m);
    j["scheduled_ir"] = ir_text;
    j["disassembly"] = disasm;
    j["repro"] = repro_line(m);
    if (is_cuda_entry(entry->artifacts)) {
      for (const auto& [name, value] : cuda_entry_fields(entry->artifacts)) j[name] = value;
    }
    fmt::print(io.out, "{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print(io.out,
             "entry       {}\n"
             "descriptor  {}\n"
             "problem     {}\n"
             "op          {} {} {}  ({})\n"
             "backend     {}  target {}\n"
             "kernel      {}\n"
             "versions    library {}, codegen {}\n"
             "compiled    {:.2f} ms on {}; last used {}; {} hits, {} compiles\n"
             "code        {} bytes\n"
             "repro       {}\n"
             "\ncache key:\n",
             m.key_hash, m.descriptor, m.problem, m.op, m.dtype, m.layout, m.shape, m.backend, m.isa,
             m.kernel_name, m.library_version, m.codegen_version, m.compile_ms, iso_time(m.created_ms),
             iso_time(m.last_used_ms), m.hits, m.compiles, code.size(), repro_line(m));
  for (std::size_t at = 0; at < m.key.size();) {
    std::size_t end = std::min(m.key.find('\n', at), m.key.size());
    fmt::print(io.out, "  {}\n", std::string_view(m.key).substr(at, end - at));
    at = end + 1;
  }
  fmt::print(io.out, "\nscheduled IR:\n{}", ir_text);
  if (!ir_text.empty() && ir_text.back() != '\n') fmt::print(io.out, "\n");
  if (is_cuda_entry(entry->artifacts)) {
    print_cuda_entry(entry->artifacts, true, !flags.has("no-disasm"), io.out);
  } else if (code.empty()) {
    fmt::print(io.out, "\n(no machine code: the {} backend does not generate any)\n", m.backend);
  } else if (!flags.has("no-disasm")) {
    fmt::print(io.out, "\ndisassembly ({}):\n{}",
               disassembler_available() ? "LLVM MC, Intel syntax" : "unavailable", disasm);
  }
  return kExitOk;
}

// ---- stats

int stats(const ParsedFlags& flags, const Io& io) {
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status;
  const dc::Scan scan = cache->scan();
  Json j = dc::stats_json(scan);
  j["directory"] = cache->dir().string();
  j["max_bytes"] = cache->options().max_bytes;
  if (flags.has("json")) {
    fmt::print(io.out, "{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print(io.out, "directory   {}\n", cache->dir().string());
  const std::size_t damaged = j["damaged_metadata"].get<std::size_t>();
  fmt::print(io.out, "entries     {} ({} with damaged metadata)\n",
             j["entries"].get<std::size_t>() + damaged, damaged);
  fmt::print(io.out, "size        {} of {} allowed\n", human_bytes(scan.total_bytes),
             cache->options().max_bytes ? human_bytes(cache->options().max_bytes) : "unlimited");
  fmt::print(io.out, "hits        {} (disk hits recorded; racing processes may drop a few)\n",
             j["hits"].get<std::uint64_t>());
  fmt::print(io.out, "misses      {} (compilations stored)\n", j["misses"].get<std::uint64_t>());
  fmt::print(io.out, "compile ms  total {:.1f}, p50 {:.2f}, p90 {:.2f}, p99 {:.2f}, max {:.2f}\n",
             j["compile_ms_total"].get<double>(), j["compile_ms_p50"].get<double>(),
             j["compile_ms_p90"].get<double>(), j["compile_ms_p99"].get<double>(),
             j["compile_ms_max"].get<double>());
  auto table = [&](std::string_view title, const Json& rows) {
    fmt::print(io.out, "\n{:<44}  {:>7}  {:>10}  {:>6}  {:>6}  {:>10}  {:>9}\n", title, "ENTRIES",
               "SIZE", "HITS", "MISSES", "COMPILE", "P50");
    for (const auto& [name, t] : rows.items()) {
      fmt::print(io.out, "{:<44}  {:>7}  {:>10}  {:>6}  {:>6}  {:>7.1f} ms  {:>6.2f} ms\n", name,
                 t["entries"].get<std::size_t>(), human_bytes(t["bytes"].get<std::uint64_t>()),
                 t["hits"].get<std::uint64_t>(), t["misses"].get<std::uint64_t>(),
                 t["compile_ms_total"].get<double>(), t["compile_ms_p50"].get<double>());
    }
  };
  table("BACKEND TARGET", j["by_backend"]);
  table("OP DTYPE", j["by_op"]);
  return kExitOk;
}

// ---- verify

int verify(const ParsedFlags& flags, const Io& io) {
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status;
  bool run = flags.has("run"), fix = flags.has("fix"), json = flags.has("json");
  dc::Scan scan = cache->scan();
  Json results = Json::array();
  std::size_t bad = 0;
  for (const dc::ScannedEntry& e : scan.entries) {
    Expected<dc::Entry> entry = cache->load(e.key_hash, fix);
    std::string problem;
    if (!entry) problem = entry.status().message();
    else if (run) problem = run_entry_against_reference(entry->meta, key_field(entry->meta.key, "threads"));
    bool ok = problem.empty();
    if (!ok) ++bad;
    std::string name = entry ? entry->meta.kernel_name : "";
    if (json) {
      results.push_back({{"key_hash", e.key_hash}, {"kernel_name", name}, {"ok", ok}, {"problem", problem}});
    } else {
      fmt::print(io.out, "{:<12}  {:<4}  {}\n", e.key_hash.substr(0, 12), ok ? "ok" : "FAIL",
                 ok ? (run ? name + " matches the reference" : name) : problem);
    }
  }
  if (json) {
    fmt::print(io.out, "{}\n", Json{{"entries", scan.entries.size()}, {"failures", bad}, {"results", results}}.dump(2));
  } else {
    fmt::print(io.out, "{} entries checked{}, {} failed{}\n", scan.entries.size(),
               run ? " and run" : "", bad, bad && fix ? " (damaged ones removed)" : "");
  }
  return bad == 0 ? kExitOk : kExitFailure;
}

// ---- purge

int purge(const ParsedFlags& flags, const Io& io) {
  Filter filter = read_filter(flags);
  bool all = flags.has("all");
  std::optional<std::int64_t> older;
  if (auto v = flags.get("older-than")) older = parse_duration_ms(*v);
  std::optional<std::int64_t> max_bytes;
  if (auto v = flags.get("max-bytes")) max_bytes = parse_int(*v, "--max-bytes");
  if (!all && !older && !max_bytes && filter.empty()) {
    throw UsageError("purge needs --all, --older-than DURATION, --max-bytes N or a filter");
  }
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status;
  dc::Removed removed;
  std::int64_t now = dc::now_unix_ms();
  if (all || older || !filter.empty()) {
    for (const dc::ScannedEntry& e : cache->scan().entries) {
      bool pick = all;
      if (!all) {
        pick = true;
        if (older) pick = now - e.mtime_ms > *older;
        if (!filter.empty()) pick = pick && e.meta && filter.matches(*e.meta);
      }
      if (!pick) continue;
      removed.add(cache->remove(e.key_hash));
    }
  }
  if (max_bytes) {
    removed.add(
        cache->evict_to(static_cast<std::uint64_t>(std::max<std::int64_t>(*max_bytes, 0))));
  }
  // What was really removed, whatever was asked: a read-only cache removes nothing.
  fmt::print(io.out, "removed {} entries ({}); {} remain in {}\n", removed.entries,
             human_bytes(removed.bytes), human_bytes(cache->scan().total_bytes), cache->dir().string());
  if (removed.failed > 0) {
    fmt::print(io.err, "convjit cache: could not remove {} {} from {}: {}\n", removed.failed,
               removed.failed == 1 ? "entry" : "entries", cache->dir().string(), removed.error);
    return kExitFailure;
  }
  return kExitOk;
}

// ---- export / import

int export_entries(std::string_view file, const ParsedFlags& flags, const Io& io) {
  int status = kExitOk;
  auto cache = open_cache(io, false, &status);
  if (!cache) return status == kExitOk ? kExitFailure : status;
  Filter filter = read_filter(flags);
  std::vector<dc::Entry> entries;
  std::size_t damaged = 0;
  for (const dc::ScannedEntry& e : cache->scan().entries) {
    if (e.meta && !filter.matches(*e.meta)) continue;
    Expected<dc::Entry> entry = cache->load(e.key_hash, false);
    if (entry) entries.push_back(std::move(*entry));
    else ++damaged;
  }
  Status written = dc::write_archive(std::string(file), entries);
  if (!written.is_ok()) {
    fmt::print(io.err, "convjit cache: {}\n", written.message());
    return kExitFailure;
  }
  fmt::print(io.out, "exported {} entries to {}{}\n", entries.size(), file,
             damaged ? fmt::format(" ({} damaged entries skipped)", damaged) : "");
  return kExitOk;
}

int import_entries(std::string_view file, const Io& io) {
  Expected<std::vector<dc::Entry>> entries = dc::read_archive(std::string(file));
  if (!entries) {
    fmt::print(io.err, "convjit cache: {}\n", entries.status().message());
    return kExitFailure;
  }
  int status = kExitOk;
  auto cache = open_cache(io, true, &status);
  if (!cache) return status == kExitOk ? kExitFailure : status;
  std::set<std::string> targets = dc::runnable_target_names();
  std::size_t imported = 0, other_isa = 0, other_version = 0;
  for (dc::Entry& entry : *entries) {
    if (entry.meta.library_version != dc::library_version()) { ++other_version; continue; }
    if (!targets.count(entry.meta.isa)) { ++other_isa; continue; }
    Status stored = cache->import(std::move(entry));
    if (!stored.is_ok()) {
      fmt::print(io.err, "convjit cache: {}\n", stored.message());
      return kExitFailure;
    }
    ++imported;
  }
  fmt::print(io.out, "imported {} entries into {}; skipped {} for another ISA, {} for another version\n",
             imported, cache->dir().string(), other_isa, other_version);
  return kExitOk;
}

// ---- dispatch

struct Sub {
  std::string_view name;
  std::string_view positional;  // metavar of the one positional argument, or empty
  std::string_view help;
  std::vector<FlagSpec> flags;
};

std::vector<Sub> subcommands() {
  return {
      {"list", "", "one line per entry, newest first", with_filters({{"json", "", "print JSON"}})},
      {"show", "KEY", "everything about one entry: descriptor, kernel, IR, disassembly",
       {{"json", "", "print JSON"}, {"no-disasm", "", "skip the disassembly"},
        {"code-file", "FILE", "also write the raw code bytes to FILE"}, {"help", "", "show this help"}}},
      {"stats", "", "totals, hit/miss counts and compile-time percentiles per backend and op",
       {{"json", "", "print JSON"}, {"help", "", "show this help"}}},
      {"verify", "", "check every entry's checksums, key and version; exit 1 if any fails",
       {{"run", "", "also run each kernel on random data against the naive reference"},
        {"fix", "", "remove entries that fail the integrity check"},
        {"json", "", "print JSON"}, {"help", "", "show this help"}}},
      {"purge", "", "remove entries",
       with_filters({{"all", "", "remove every entry"},
                     {"older-than", "DURATION", "entries not used for this long (90s, 30m, 12h, 7d)"},
                     {"max-bytes", "N", "evict least recently used entries down to N bytes"}})},
      {"export", "FILE", "write entries to one archive file", with_filters({})},
      {"import", "FILE", "add an archive's entries; other ISAs and versions are skipped",
       {{"help", "", "show this help"}}},
      {"repro", "KEY", "print the `convjit run ... --check` line that rebuilds this kernel",
       {{"help", "", "show this help"}}},
  };
}

int dispatch(const Sub& sub, std::span<const std::string_view> args, const Io& io) {
  std::string positional;
  if (!sub.positional.empty() && !args.empty() && !args.front().starts_with("-")) {
    positional = std::string(args.front());
    args = args.subspan(1);
  }
  ParsedFlags flags = parse_flags(args, sub.flags);
  if (flags.has("help")) {
    fmt::print(io.out, "usage: convjit cache {}{}{} [flags]\n\n{}\n\nflags:\n{}", sub.name,
               sub.positional.empty() ? "" : " ", sub.positional, sub.help, format_flag_help(sub.flags));
    return kExitOk;
  }
  if (!sub.positional.empty() && positional.empty()) {
    throw UsageError(fmt::format("`convjit cache {}` needs {}", sub.name, sub.positional));
  }
  if (sub.name == "list") return list_entries(flags, io);
  if (sub.name == "show") return show_entry(positional, flags, io, false);
  if (sub.name == "repro") return show_entry(positional, flags, io, true);
  if (sub.name == "stats") return stats(flags, io);
  if (sub.name == "verify") return verify(flags, io);
  if (sub.name == "purge") return purge(flags, io);
  if (sub.name == "export") return export_entries(positional, flags, io);
  return import_entries(positional, io);
}

}  // namespace

int cache_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  Io io{out, err};
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    fmt::print(args.empty() ? err : out, "{}", kUsage);
    return args.empty() ? kExitUsage : kExitOk;
  }
  for (const Sub& sub : subcommands()) {
    if (sub.name != args.front()) continue;
    try {
      return dispatch(sub, args.subspan(1), io);
    } catch (const UsageError& e) {
      fmt::print(err, "convjit cache {}: {}\n(see `convjit cache {} --help`)\n", sub.name, e.what(), sub.name);
      return kExitUsage;
    } catch (const std::exception& e) {
      fmt::print(err, "convjit cache {}: {}\n", sub.name, e.what());
      return kExitFailure;
    }
  }
  fmt::print(err, "convjit cache: unknown subcommand '{}'\n\n{}", args.front(), kUsage);
  return kExitUsage;
}

}  // namespace convjit::cli
