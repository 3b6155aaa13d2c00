// `convjit cache verify --run`: runs a stored kernel against the naive reference.
#pragma once

#include <string>

#include "runtime/disk_cache/disk_cache.hpp"

namespace convjit::cli {

/// Compiles the entry's descriptor for its backend and target (compile() finds the kernel in
/// the same cache), runs it on random data and compares with the naive reference. `threads` is
/// the entry's thread count as its key records it ("" for the default). Returns "" when the
/// results match, else what went wrong (a mismatch, or why it cannot run).
std::string run_entry_against_reference(const disk_cache::EntryMeta& meta,
                                        const std::string& threads);

}  // namespace convjit::cli
