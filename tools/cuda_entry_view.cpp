#include "tools/cuda_entry_view.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace convjit::cli {
namespace {

std::string text(const ArtifactMap& artifacts, const char* name) {
  const auto it = artifacts.find(name);
  return it == artifacts.end() ? std::string() : std::string(it->second.begin(), it->second.end());
}

/// `name` on the PATH, or empty.
std::string find_tool(const char* name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/" + name;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

/// The cubin's SASS from nvdisasm (or cuobjdump -sass); an explanation when neither runs.
std::string sass_of(const std::vector<std::uint8_t>& cubin) {
  if (cubin.empty()) return "(no cubin: the interpret mode stores none)\n";
  std::string tool = find_tool("nvdisasm");
  std::string args = " -c ";
  if (tool.empty()) {
    tool = find_tool("cuobjdump");
    args = " -sass ";
  }
  if (tool.empty()) return "(no SASS: neither nvdisasm nor cuobjdump is on the PATH)\n";
  char path[] = "/tmp/convjit-cubin-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return "(no SASS: cannot write a temporary file)\n";
  const bool written =
      ::write(fd, cubin.data(), cubin.size()) == static_cast<ssize_t>(cubin.size());
  ::close(fd);
  std::string sass;
  if (written) {
    const std::string command = tool + args + path + " 2>&1";
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buffer[4096];
      std::size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) sass.append(buffer, n);
      ::pclose(pipe);
    }
  }
  ::unlink(path);
  return sass.empty() ? "(the disassembler printed nothing)\n" : sass;
}

}  // namespace

bool is_cuda_entry(const ArtifactMap& artifacts) { return artifacts.count("cu") != 0; }

std::string device_for_entry(const std::string& backend, const std::string& target) {
  if (backend != "cuda") return "";
  return target.rfind("interpret", 0) == 0 ? "cuda-interpret" : "cuda";
}

void print_cuda_entry(const ArtifactMap& artifacts, bool source, bool sass, std::ostream& out) {
  const std::string resources = text(artifacts, "resources");
  fmt::print(
      out, "\nCUDA resources (ptxas, per kernel):\n{}",
      resources.empty() ? "  (none stored: the interpret mode does not call NVRTC)\n" : resources);
  const auto cubin = artifacts.find("cubin");
  fmt::print(out, "cubin       {} bytes, PTX {} bytes\n",
             cubin == artifacts.end() ? 0 : cubin->second.size(), text(artifacts, "ptx").size());
  if (source) fmt::print(out, "\nCUDA source (generated body):\n{}", text(artifacts, "cu"));
  if (sass) {
    fmt::print(out, "\nSASS:\n{}",
               sass_of(cubin == artifacts.end() ? std::vector<std::uint8_t>{} : cubin->second));
  }
}

std::vector<std::pair<std::string, std::string>> cuda_entry_fields(const ArtifactMap& artifacts) {
  const auto cubin = artifacts.find("cubin");
  return {
      {"cuda_source", text(artifacts, "cu")},
      {"cuda_resources", text(artifacts, "resources")},
      {"sass", sass_of(cubin == artifacts.end() ? std::vector<std::uint8_t>{} : cubin->second)}};
}

}  // namespace convjit::cli
