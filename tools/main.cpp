// The `convjit` command line: dispatches to one subcommand per entry of kSubcommands. A new
// subcommand is one more entry (name, summary, entry point).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <array>
#include <iostream>
#include <span>
#include <string_view>
#include <vector>

#include "convjit/convjit.h"
#include "tools/bench_launcher.hpp"
#include "tools/cache_command.hpp"
#include "tools/cli_args.hpp"
#include "tools/compile_command.hpp"
#include "tools/run_command.hpp"

namespace {

using convjit::cli::kExitOk;
using convjit::cli::kExitUsage;

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*main)(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);
};

constexpr std::array kSubcommands{
    Subcommand{"run", convjit::cli::kRunSummary, &convjit::cli::run_command},
    Subcommand{"compile", convjit::cli::kCompileSummary, &convjit::cli::compile_command},
    Subcommand{"cache", convjit::cli::kCacheSummary, &convjit::cli::cache_command},
    Subcommand{"bench", convjit::cli::kBenchSummary, &convjit::cli::bench_command},
};

void print_help(std::ostream& out) {
  fmt::print(out,
             "convjit: JIT-compiled TensorFlow convolution gradient ops\n"
             "\n"
             "usage: convjit <command> [flags]\n"
             "       convjit <command> --help\n"
             "\n"
             "commands:\n");
  for (const Subcommand& sub : kSubcommands) fmt::print(out, "  {:<8}  {}\n", sub.name, sub.summary);
  fmt::print(out,
             "\n"
             "environment: CONVJIT_VERBOSE, CONVJIT_CACHE_DIR, CONVJIT_CACHE_CAPACITY,\n"
             "CONVJIT_CACHE_BYTES, CONVJIT_CACHE_MAX_BYTES, CONVJIT_NUM_THREADS, CONVJIT_ISA,\n"
             "CONVJIT_BACKEND, CONVJIT_ALWAYS_COMPILE, CONVJIT_CUDA_INTERPRET\n"
             "(see README.md).\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> words(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (words.empty()) {
    print_help(std::cerr);
    return kExitUsage;
  }
  const std::string_view command = words.front();
  if (command == "--help" || command == "-h" || command == "help") {
    if (command == "help" && words.size() > 1) {
      // `convjit help run` is `convjit run --help`.
      for (const Subcommand& sub : kSubcommands) {
        if (sub.name == words[1]) {
          const std::array<std::string_view, 1> help{"--help"};
          return sub.main(help, std::cout, std::cerr);
        }
      }
    }
    print_help(std::cout);
    return kExitOk;
  }
  if (command == "--version") {
    fmt::print("convjit {}\n", convjit_version());
    return kExitOk;
  }
  for (const Subcommand& sub : kSubcommands) {
    if (sub.name == command) {
      return sub.main(std::span(words).subspan(1), std::cout, std::cerr);
    }
  }
  fmt::print(std::cerr, "convjit: unknown command '{}'\n\n", command);
  print_help(std::cerr);
  return kExitUsage;
}
