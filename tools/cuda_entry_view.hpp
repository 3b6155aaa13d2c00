// What `convjit cache show` and `cache verify --run` need for entries of the CUDA backend: the
// stored CUDA source, the resources ptxas reported, the SASS (when nvdisasm or cuobjdump is on
// the PATH), and the device an entry's kernel runs on.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace convjit::cli {

using ArtifactMap = std::map<std::string, std::vector<std::uint8_t>>;

/// Whether the entry holds CUDA code (its generated source).
bool is_cuda_entry(const ArtifactMap& artifacts);

/// The device a stored kernel of `backend` for `target` runs on ("cuda-interpret", "cuda",
/// or "" for the CPU).
std::string device_for_entry(const std::string& backend, const std::string& target);

/// Prints the CUDA part of an entry: resources per kernel, the source, and the SASS of its cubin
/// when a disassembler is found (else why not). `source` and `sass` select the long parts.
void print_cuda_entry(const ArtifactMap& artifacts, bool source, bool sass, std::ostream& out);

/// The same as (name, text) fields for JSON output: cuda_source, cuda_resources, sass.
std::vector<std::pair<std::string, std::string>> cuda_entry_fields(const ArtifactMap& artifacts);

}  // namespace convjit::cli
