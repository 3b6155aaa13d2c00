// The benchmark's peers: implementations loaded from peer libraries (peer_abi.h) at run time,
// so that the benchmark itself links no peer and two releases of one library can be measured
// side by side in one process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tools/bench/peer_abi.h"

namespace convjit::bench {

class PeerLibrary;

/// One problem set up in a peer, bound to the caller's buffers.
class PeerConv {
 public:
  ~PeerConv();
  PeerConv(const PeerConv&) = delete;
  PeerConv& operator=(const PeerConv&) = delete;

  /// Each throws std::runtime_error with the peer's message on failure.
  void bind(void* x, void* w, void* y);
  void run();
  /// Brings a preferred-layout result into the caller's output buffer (not timed).
  void finish();
  double creation_ms() const;

 private:
  friend class PeerLibrary;
  PeerConv(const PeerLibrary* library, convjit_peer_conv* conv) : library_(library), conv_(conv) {}
  const PeerLibrary* library_;
  convjit_peer_conv* conv_;
};

/// A loaded peer library. Never unloaded: the libraries it pulls in (oneDNN, its OpenMP or
/// TBB runtime) keep threads and statics alive until the process ends.
class PeerLibrary {
 public:
  /// Loads `path` in a scope of its own (RTLD_LOCAL). Null, with the reason in `error`, when it
  /// cannot be loaded or has another ABI version.
  static std::unique_ptr<PeerLibrary> load(const std::string& path, std::string* error);

  /// "onednn-2.6.3".
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  /// Threads for the following runs and the highest ISA ("avx2" or "").
  void configure(int threads, const std::string& max_isa) const;
  /// Null, with the reason in `error`, when the peer cannot run the problem on this host.
  std::unique_ptr<PeerConv> create(const convjit_peer_problem& problem, std::string* error) const;

 private:
  friend class PeerConv;
  PeerLibrary() = default;
  std::string path_, name_;
  convjit_peer_configure_fn configure_ = nullptr;
  convjit_peer_create_fn create_ = nullptr;
  convjit_peer_bind_fn bind_ = nullptr;
  convjit_peer_run_fn run_ = nullptr;
  convjit_peer_finish_fn finish_ = nullptr;
  convjit_peer_creation_ms_fn creation_ms_ = nullptr;
  convjit_peer_destroy_fn destroy_ = nullptr;
};

/// The peer libraries installed beside this executable (convjit_bench_*.so, sorted by name).
std::vector<std::string> installed_peer_libraries();

}  // namespace convjit::bench
