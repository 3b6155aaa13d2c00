// CpuInfo: what the CPU planner and the x86 emitter may assume about the core that runs a
// kernel: its vector ISA, FMA rate and cache sizes, read from the host (CPUID) or set by tests.
#pragma once

#include <cstdint>
#include <string>

namespace convjit::cpu {

enum class Isa : std::uint8_t { kGeneric, kAvx2, kAvx512 };

struct CpuInfo {
  Isa isa = Isa::kGeneric;
  int vector_bytes = 0;       // 64 (zmm), 32 (ymm), 0 (scalar interpreter)
  int vector_registers = 0;   // 32 (AVX-512), 16 (AVX2)
  bool has_fma = false;
  bool has_f16c = false;
  bool has_avx512_bf16 = false;
  // Whether vdpbf16ps (two bfloat16 products a lane) outruns widening bfloat16 to f32 and
  // running f32 FMAs. AMD's Zen 4 and 5 issue it in the FMA pipes at the FMA's rate: twice the
  // FLOPs. The Intel Xeons that have it issue it at a quarter of the FMA's instruction rate
  // (measured on a 2026 Xeon with AMX: 118 GFLOP/s per core of vdpbf16ps against 228 of f32
  // FMAs), half the FLOPs, and there bfloat16 runs faster widened (1.30x over twelve network
  // layers, docs/PERFORMANCE.md).
  bool bf16_dot_beats_fma = true;
  // AMX (Sapphire Rapids and later Xeons): tdpbf16ps multiplies a 16-row tile of bfloat16
  // pairs by a 16-column one into 16x16 f32 accumulators, 13-16x the vector units' bfloat16
  // rate (2900-3600 GFLOP/s per core against 228 of f32 FMAs on a 2026 Xeon). Set only where
  // the CPU has AMX-TILE and AMX-BF16 and Linux granted this process the tile state
  // (amx_bf16_usable); the data gradient's paired tiles then run on it.
  bool has_amx_bf16 = false;
  // Vector FMAs the core starts per cycle at vector_bytes. Two on most x86 cores; one where
  // the FMA pipes are half as wide as the vector and run each one in two halves (Zen 1 and
  // Zen+ with ymm, Zen 4 with zmm). Half the rate halves the accumulators that hide the FMA
  // latency, so small tiles and tails cost relatively less there.
  int fmas_per_cycle = 2;
  // Per-core data caches: the host's own (CpuInfo::host asks the C library, which reads
  // CPUID); these defaults (Zen 4's) stand where it cannot tell.
  static constexpr std::int64_t kDefaultL1Bytes = 32 * 1024;
  static constexpr std::int64_t kDefaultL2Bytes = 1024 * 1024;
  std::int64_t l1_bytes = kDefaultL1Bytes;
  std::int64_t l2_bytes = kDefaultL2Bytes;
  static constexpr std::int64_t kCacheLineBytes = 64;  // every x86 core
  static constexpr std::int64_t kL1Ways = 8;           // x86 cores since Sandy Bridge and Zen
  // The last-level cache one core's data lives in (a Zen CCX's L3, a server part's slice
  // share): an output larger than this is evicted before anyone reads it back, so its tiles
  // write it with non-temporal stores.
  std::int64_t llc_bytes = 8 * 1024 * 1024;
  // The levels below L1 as the planner's cost estimates see them: load-to-use latency in cycles
  // and the bytes per cycle one core sustains from each. Typical of current x86 cores (Zen 3-5
  // and recent Intel: L2 12-16 cycles, L3 40-55, DRAM a few hundred) and not read from the
  // host: what the decisions they feed depend on is their ratio to the FMA rate, which is.
  static constexpr double kL2LatencyCycles = 14, kL3LatencyCycles = 50, kMemoryLatencyCycles = 250;
  static constexpr double kL2BytesPerCycle = 32, kL3BytesPerCycle = 16, kMemoryBytesPerCycle = 8;
  // Where the ratio itself differs by core: the bytes L2 fills into L1 per cycle, a whole line
  // on Intel's cores and on Zen 5, half of one on Zen 1-4 (their optimization manuals), which
  // decides whether a tile's L1 misses hide under its FMAs.
  double l2_fill_bytes_per_cycle = kL2BytesPerCycle;

  /// Whether bfloat16 kernels use vdpbf16ps (paired layouts) rather than widening to f32.
  bool uses_bf16_dot() const { return has_avx512_bf16 && bf16_dot_beats_fma; }
  /// Whether the data gradient's bfloat16 tiles pair output channels: for vdpbf16ps where it
  /// outruns the FMAs, and for AMX, whose tiles take the same pairs.
  bool pairs_bf16_data_gradient() const {
    return has_avx512_bf16 && (bf16_dot_beats_fma || has_amx_bf16);
  }

  /// Lanes of one vector for an element of `bytes` bytes (1 for the scalar target).
  int lanes(int bytes) const { return vector_bytes > 0 ? vector_bytes / bytes : 1; }
  /// "avx512", "avx2", "generic"; with the features that change code, e.g. "avx512+bf16", a
  /// vdpbf16ps slower than the FMAs ("/bf16fma"), AMX ("+amx"), an FMA rate other than two a
  /// cycle and caches other than the defaults, e.g. "avx2+f16c/fma1/l2=512k".
  std::string name() const;

  /// A scalar core (no vector unit): what the CPU schedule assumes when no x86 ISA is used.
  static CpuInfo generic();
  /// The host CPU, capped at `max_isa` (CONVJIT_ISA).
  static CpuInfo host(Isa max_isa);
};

/// Whether this process may run AMX bfloat16 instructions: the CPU has AMX-TILE and AMX-BF16
/// and Linux grants the tile data state (asked once; a kernel older than 5.16, or a hypervisor
/// that hides the state, refuses). Without the grant the first tile instruction faults.
bool amx_bf16_usable();

}  // namespace convjit::cpu
