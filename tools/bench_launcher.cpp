#include "tools/bench_launcher.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/cli_args.hpp"

namespace convjit::cli {
namespace {

constexpr const char* kBenchProgram = "convjit-bench";

// convjit-bench beside the running executable (build tree, install prefix, wheel), or empty.
std::string sibling_program() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "";
  const std::filesystem::path sibling = self.parent_path() / kBenchProgram;
  return ::access(sibling.c_str(), X_OK) == 0 ? sibling.string() : "";
}

}  // namespace

int bench_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> words{kBenchProgram};
  for (std::string_view arg : args) words.emplace_back(arg);
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  out.flush();
  err.flush();
  const std::string sibling = sibling_program();
  if (!sibling.empty()) {
    ::execv(sibling.c_str(), argv.data());
  } else {
    ::execvp(kBenchProgram, argv.data());
  }
  const int error = errno;
  if (error == ENOENT) {
    fmt::print(err,
               "convjit bench: {} is not installed beside convjit (a partial install, or a build "
               "without the tools)\n",
               kBenchProgram);
  } else {
    fmt::print(err, "convjit bench: cannot run {}: {}\n", sibling.empty() ? kBenchProgram : sibling,
               std::strerror(error));
  }
  return kExitFailure;
}

}  // namespace convjit::cli
