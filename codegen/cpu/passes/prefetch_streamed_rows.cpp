// Software prefetch of a tile's next row group. A register tile reads its per-row operand (dy's
// pixels in an input gradient, one broadcast per row and reduction point) as `rows` streams one
// row stride apart, each advancing a few bytes per reduction point. The hardware prefetchers
// follow sequential and strided streams, not this interleave of many: each time the rows cross
// into new lines all of them miss at once. Where the operand stays in this core's L2 between
// its uses that costs an L2 hit per line; where it does not, each crossing waits on L3 or
// memory, and MobileNetV2's 56x56 expand layer (14 rows of 576 bytes, dy 14 MB at batch 8) ran
// at 36% of the FMA peak. Tiles whose per-row operand outgrows the L2 are marked; the backend
// then fetches, while a row group computes, the lines the next row group (the same offsets
// `rows` rows further) will read. Operands that fit keep the prefetch's load slots free: on
// 7x7 layers whose dy fits, the prefetches cost 1-3%. Nor are rows prefetched whose lines
// would crowd L1's sets: rows a multiple of a way's span apart (4 KiB: 1024 float channels)
// share one set, and the next group's lines evicted the current group's (UNet's 2x2 stride-2
// up-convolution, 6 rows of 1024 channels, AVX2 code: 0.76x). The current and next groups'
// lines may take half of each set they map to.
//
// A filter gradient's tiles prefetch their next block of pixels instead (prefetch_next_blocks).
#include <numeric>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest prefetch_streamed_rows(LoopNest nest, const CpuPlan& plan) {
  if (!plan.prefetch_streamed_rows) return nest;
  auto streamed_rows = [&](const Tile& t, const Access& x) {
    Affine offset;
    if (!flatten_access(nest, x, &offset)) return false;
    const Buffer& buf = nest.buffers[static_cast<std::size_t>(x.buffer)];
    const std::int64_t eb = dtype_size(buf.dtype);
    // One broadcast per row (no column lanes), rows in different lines, a buffer beyond L2.
    const std::int64_t row_bytes = offset.coef_of(t.row_var) * eb;
    if (offset.coef_of(t.col_var) != 0 || row_bytes < CpuInfo::kCacheLineBytes ||
        buf.elements() * eb <= plan.cpu.l2_bytes) {
      return false;
    }
    const std::int64_t way_span = plan.cpu.l1_bytes / CpuInfo::kL1Ways;
    const std::int64_t sets = way_span / std::gcd(row_bytes, way_span);
    return 2 * t.rows <= sets * (CpuInfo::kL1Ways / 2);
  };
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    t.prefetch_next_rows = t.rows > 1 && (streamed_rows(t, t.a) || streamed_rows(t, t.b));
  });
  return nest;
}

}  // namespace convjit::cpu
