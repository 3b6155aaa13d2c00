// The register file of a register tile, in one place: the tile model (which shapes fit) and the
// x86 emitter (how it lays them out) count the same registers.
//
// A tile holds rows x vecs accumulators. Beside them it either
//   - holds its shared operands (the vectors every row multiplies, or one broadcast) in
//     registers and keeps two temporaries for per-row operands and stores ("held"), or
//   - (an outer product) keeps every row's broadcast in a register and streams the shared
//     vectors through one temporary, each loaded once and used by all rows ("streamed").
#pragma once

#include <cstdint>

namespace convjit::cpu {

/// Registers a held tile keeps for per-row operands and stores.
inline constexpr int kTileTemporaries = 2;

/// Rows of `vecs` accumulators a held tile fits beside `shared` registers of shared operands.
inline std::int64_t held_rows(int registers, std::int64_t vecs, std::int64_t shared) {
  return (registers - kTileTemporaries - shared) / vecs;
}

/// Rows of `vecs` accumulators a streamed outer product fits: each row also holds its
/// broadcast, and one temporary carries the streamed vectors.
inline std::int64_t streamed_rows(int registers, std::int64_t vecs) {
  return (registers - 1) / (vecs + 1);
}

}  // namespace convjit::cpu
