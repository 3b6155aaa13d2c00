#include "tools/bench/peers.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace convjit::bench {
namespace {

constexpr std::size_t kErrorBytes = 1024;

template <typename Fn>
bool find(void* handle, const char* symbol, Fn* out, std::string* error) {
  *out = reinterpret_cast<Fn>(::dlsym(handle, symbol));  // NOLINT: the ABI's function types
  if (*out == nullptr) *error = std::string("no symbol ") + symbol;
  return *out != nullptr;
}

}  // namespace

std::unique_ptr<PeerLibrary> PeerLibrary::load(const std::string& path, std::string* error) {
  // Local scope: this library's oneDNN resolves inside it, never against another peer's.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    *error = why != nullptr ? why : "dlopen failed";
    return nullptr;
  }
  std::unique_ptr<PeerLibrary> lib(new PeerLibrary());
  lib->path_ = path;
  convjit_peer_abi_version_fn version = nullptr;
  convjit_peer_name_fn name = nullptr;
  if (!find(handle, "convjit_peer_abi_version", &version, error) ||
      !find(handle, "convjit_peer_name", &name, error) ||
      !find(handle, "convjit_peer_configure", &lib->configure_, error) ||
      !find(handle, "convjit_peer_create", &lib->create_, error) ||
      !find(handle, "convjit_peer_bind", &lib->bind_, error) ||
      !find(handle, "convjit_peer_run", &lib->run_, error) ||
      !find(handle, "convjit_peer_finish", &lib->finish_, error) ||
      !find(handle, "convjit_peer_creation_ms", &lib->creation_ms_, error) ||
      !find(handle, "convjit_peer_destroy", &lib->destroy_, error)) {
    return nullptr;
  }
  if (version() != CONVJIT_PEER_ABI_VERSION) {
    *error = "peer ABI version " + std::to_string(version()) + ", this benchmark speaks " +
             std::to_string(CONVJIT_PEER_ABI_VERSION);
    return nullptr;
  }
  lib->name_ = name();
  return lib;
}

void PeerLibrary::configure(int threads, const std::string& max_isa) const {
  configure_(threads, max_isa.c_str());
}

std::unique_ptr<PeerConv> PeerLibrary::create(const convjit_peer_problem& problem,
                                              std::string* error) const {
  char message[kErrorBytes] = {};
  convjit_peer_conv* conv = create_(&problem, message, sizeof message);
  if (conv == nullptr) {
    *error = message;
    return nullptr;
  }
  return std::unique_ptr<PeerConv>(new PeerConv(this, conv));
}

PeerConv::~PeerConv() { library_->destroy_(conv_); }

void PeerConv::bind(void* x, void* w, void* y) {
  char message[kErrorBytes] = {};
  if (library_->bind_(conv_, x, w, y, message, sizeof message) != 0) {
    throw std::runtime_error(library_->name() + ": " + message);
  }
}

void PeerConv::run() {
  char message[kErrorBytes] = {};
  if (library_->run_(conv_, message, sizeof message) != 0) {
    throw std::runtime_error(library_->name() + ": " + message);
  }
}

void PeerConv::finish() {
  char message[kErrorBytes] = {};
  if (library_->finish_(conv_, message, sizeof message) != 0) {
    throw std::runtime_error(library_->name() + ": " + message);
  }
}

double PeerConv::creation_ms() const { return library_->creation_ms_(conv_); }

std::vector<std::string> installed_peer_libraries() {
  std::vector<std::string> found;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return found;
  for (const auto& entry : std::filesystem::directory_iterator(self.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("convjit_bench_") && name.ends_with(".so")) {
      found.push_back(entry.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace convjit::bench
