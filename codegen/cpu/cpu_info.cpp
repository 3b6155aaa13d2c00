// CpuInfo: a scalar core, and the host CPU's features capped by CONVJIT_ISA.
#include "codegen/cpu/cpu_info.hpp"

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>

#include <cstring>
#endif

namespace convjit::cpu {

std::string CpuInfo::name() const {
  std::string out;
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: out = "avx2"; break;
    case Isa::kAvx512: out = "avx512"; break;
  }
  // Only the features that change the generated code are named: they are part of cache keys.
  if (!has_fma) out += "-fma";
  if (has_f16c) out += "+f16c";
  if (has_avx512_bf16) out += "+bf16";
  if (has_avx512_bf16 && !bf16_dot_beats_fma) out += "/bf16fma";
  if (has_amx_bf16) out += "+amx";
  if (fmas_per_cycle != 2) out += "/fma" + std::to_string(fmas_per_cycle);
  if (l1_bytes != kDefaultL1Bytes) out += "/l1=" + std::to_string(l1_bytes / 1024) + "k";
  if (l2_bytes != kDefaultL2Bytes) out += "/l2=" + std::to_string(l2_bytes / 1024) + "k";
  return out;
}

namespace {

#if defined(__x86_64__) || defined(__i386__)
/// The CPU's vendor, family and model (CPUID leaves 0 and 1): what the rates below that
/// CPUID's feature bits do not state are read from.
struct CpuIdentity {
  bool amd = false;
  bool hygon = false;
  bool intel = false;
  unsigned family = 0;
  unsigned model = 0;
};

CpuIdentity cpu_identity() {
  CpuIdentity id;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return id;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  id.hygon = std::strcmp(vendor, "HygonGenuine") == 0;
  id.intel = std::strcmp(vendor, "GenuineIntel") == 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return id;
  const unsigned base_family = (eax >> 8) & 0xF;
  id.family = base_family == 0xF ? base_family + ((eax >> 20) & 0xFF) : base_family;
  id.model = ((eax >> 4) & 0xF) |
             (base_family == 0xF || base_family == 0x6 ? ((eax >> 16) & 0xF) << 4 : 0);
  return id;
}

/// Bytes one pass of the core's FMA pipes covers: AMD's Zen 1 and Zen+ (family 17h below
/// model 30h, and Hygon's family 18h) run 128-bit halves; Zen 2 to Zen 4 (up to family 19h)
/// 256-bit halves; Zen 5 and Intel's AVX-512 cores whole zmm vectors. A CPU this does not
/// know is taken to run its widest vector in one pass.
int fma_datapath_bytes(const CpuIdentity& id, int widest_vector_bytes) {
  if ((id.amd && id.family == 0x17 && id.model < 0x30) || (id.hygon && id.family == 0x18)) {
    return 16;
  }
  if (id.amd && (id.family == 0x17 || id.family == 0x19)) return 32;
  return widest_vector_bytes;
}

/// Bytes per cycle L2 fills into L1: 64 on Intel's cores since Haswell and on Zen 5 (family
/// 0x1A), 32 on Zen 1-4 (and Hygon's Zen).
double l2_fill_rate(const CpuIdentity& id) {
  if (id.intel || (id.amd && id.family >= 0x1A)) return 64;
  return CpuInfo::kL2BytesPerCycle;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
/// Features read from CPUID directly: not every compiler's __builtin_cpu_supports knows them
/// (clang 14 knows neither). F16C: leaf 1, ECX bit 29; AVX512_BF16: leaf 7 sub-leaf 1, EAX bit 5.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx >> 29) & 1U;
}

bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1U;
}
#endif

/// `name`'s size from the C library (CPUID underneath), or `fallback` when it reports none or
/// something outside [lo, hi] (a virtual machine may hide or garble the cache leaves).
std::int64_t cache_bytes(int name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const long bytes = sysconf(name);
  return bytes >= lo && bytes <= hi ? static_cast<std::int64_t>(bytes) : fallback;
}

}  // namespace

bool amx_bf16_usable() {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  // AMX-TILE and AMX-BF16: CPUID leaf 7, EDX bits 24 and 22. The grant is per process and
  // idempotent; asked once.
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    if (((edx >> 24) & 1U) == 0 || ((edx >> 22) & 1U) == 0) return false;
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

CpuInfo CpuInfo::generic() {
  CpuInfo t;
  t.isa = Isa::kGeneric;
  t.vector_bytes = 0;
  t.vector_registers = 0;
  return t;
}

CpuInfo CpuInfo::host(Isa max_isa) {
  CpuInfo t = generic();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const CpuIdentity identity = cpu_identity();
  if (avx512 && max_isa >= Isa::kAvx512) {
    t.isa = Isa::kAvx512;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_avx512_bf16 = cpu_has_avx512_bf16();
    t.bf16_dot_beats_fma = !identity.intel;
    t.has_amx_bf16 = t.has_avx512_bf16 && amx_bf16_usable();
  } else if (avx2 && max_isa >= Isa::kAvx2) {
    t.isa = Isa::kAvx2;
    t.vector_bytes = 32;
    t.vector_registers = 16;
  }
  if (t.isa != Isa::kGeneric) {
    t.has_fma = __builtin_cpu_supports("fma");
    t.has_f16c = cpu_has_f16c();
    const int datapath = fma_datapath_bytes(identity, t.vector_bytes);
    t.fmas_per_cycle = datapath >= t.vector_bytes ? 2 : 1;
    t.l2_fill_bytes_per_cycle = l2_fill_rate(identity);
    // The last-level cache keeps its default: what a VM reports for it (the whole package's
    // L3 here, where one core's complex has an eighth of it) is not the share a core gets.
    t.l1_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, kDefaultL1Bytes, 8 << 10, 256 << 10);
    t.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE, kDefaultL2Bytes, 128 << 10, 16 << 20);
  }
#else
  (void)max_isa;
#endif
  return t;
}

}  // namespace convjit::cpu
