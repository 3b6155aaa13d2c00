// What the x86 backend emits, read back from the disassembly (objdump): FMA with embedded
// broadcasts on AVX-512, the dtype conversions of bfloat16 and half, ymm code under AVX2, an
// interior reduction loop with no per-element compare or branch; and that the code pages are
// not writable once compiled (W^X), with kernel names that record the schedule.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_pipeline.hpp"
#include "codegen/x86/x86_backend.hpp"
#include "frontend/validate.hpp"

namespace convjit::codegen {
namespace {

ConvProblem problem_of(OpKind op, DType dtype, std::int64_t c, std::int64_t hw = 14) {
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.dtype = dtype;
  d.input = {2, hw, hw, c};
  d.filter = {3, 3, c, c};
  d.strides = {1, 1, 1, 1};
  d.padding = Padding::kSame;
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value());
  ConvProblem problem = *p;
  problem.op = op;
  problem.direction = op == OpKind::kConv2DBackpropFilter ? ConvDirection::kBackpropFilter
                                                          : ConvDirection::kBackpropData;
  return problem;
}

struct Compiled {
  std::unique_ptr<CompiledCode> code;
  std::string disassembly;
};

bool have_objdump() { return std::system("objdump --version > /dev/null 2>&1") == 0; }

std::string disassemble(std::span<const std::uint8_t> bytes) {
  const std::string path = fmt::format("{}/convjit_x86_text_{}.bin", ::testing::TempDir(), getpid());
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string cmd = fmt::format("objdump -D -b binary -mi386:x86-64 -M intel {}", path);
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  std::remove(path.c_str());
  return out;
}

// The host's target for `isa`; AVX-512 code is generated (not run) even where the host
// lacks it, with every feature the emitter uses.
cpu::CpuInfo target_for(cpu::Isa isa) {
  cpu::CpuInfo t = cpu::CpuInfo::host(isa);
  if (isa == cpu::Isa::kAvx512 && t.isa != isa) {
    t.isa = isa;
    t.vector_bytes = 64;
    t.vector_registers = 32;
    t.has_fma = t.has_f16c = t.has_avx512_bf16 = true;
  }
  // The vector units' code whatever the host: the AMX tiles have a test of their own.
  t.has_amx_bf16 = false;
  return t;
}

Compiled compile_for_target(const ConvProblem& p, const cpu::CpuInfo& target, int threads = 1) {
  const ir::LoopNest nest = cpu::lower_and_schedule(p, target, threads);
  auto code = x86::emit_nest(nest, target);
  EXPECT_TRUE(code.has_value()) << code.status().to_string();
  Compiled c;
  if (!code) return c;
  c.code = std::move(*code);
  c.disassembly = disassemble(c.code->code_bytes());
  return c;
}

Compiled compile_for(const ConvProblem& p, cpu::Isa isa) {
  return compile_for_target(p, target_for(isa));
}

bool host_has(cpu::Isa isa) { return cpu::CpuInfo::host(isa).isa == isa; }

// `op` of a batch of 8 56x56 images, 1x1 filter, stride 1, VALID: ic channels in, oc out.
ConvProblem batch8_56x56_1x1(OpKind op, DType dtype, std::int64_t ic, std::int64_t oc) {
  OpDescriptor d;
  d.op = op;
  d.dtype = dtype;
  d.input = {8, 56, 56, ic};
  d.filter = {1, 1, ic, oc};
  d.strides = {1, 1, 1, 1};
  d.padding = Padding::kValid;
  d.out_backprop = {8, 56, 56, oc};
  Expected<ConvProblem> p = validate(d);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  return *p;
}

struct Insn {
  std::uint64_t addr = 0;
  std::string text;
};

std::vector<Insn> parse(const std::string& dis) {
  std::vector<Insn> out;
  static const std::regex line(R"(^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)$)");
  std::istringstream in(dis);
  std::string l;
  std::smatch m;
  while (std::getline(in, l)) {
    if (std::regex_match(l, m, line) && !m[2].str().empty()) {
      out.push_back({std::stoull(m[1].str(), nullptr, 16), m[2].str()});
    }
  }
  return out;
}

bool is_cond_jump(const std::string& t) {
  return t.size() > 1 && t[0] == 'j' && t.rfind("jmp", 0) != 0;
}

// The innermost loop (a backward conditional jump enclosing no other) with the most FMAs.
struct LoopStats {
  int fmas = 0, compares = 0, cond_jumps = 0, loads = 0;
  int widenings = 0;  // 16-bit to f32 conversions of vectors (vpmovzxwd, vpslld, vcvtph2ps)
  int prefetches = 0;
};

// A vector load or broadcast from memory (an FMA's own memory operand is not counted).
bool is_vector_load(const std::string& t) {
  static const std::regex load_re(
      R"(^(vmovup[sd]|vmovdqu32|vbroadcasts[sd]|vpbroadcast[wd]|vpmovzxwd|vcvtph2ps))"
      R"(\s+[xyz]mm\d+,\w+ PTR)");
  return std::regex_search(t, load_re);
}

std::vector<LoopStats> innermost_loops(const std::vector<Insn>& insns) {
  std::vector<LoopStats> loops;
  static const std::regex target_re(R"(0x([0-9a-f]+))");
  for (std::size_t j = 0; j < insns.size(); ++j) {
    if (!is_cond_jump(insns[j].text)) continue;
    std::smatch m;
    if (!std::regex_search(insns[j].text, m, target_re)) continue;
    const std::uint64_t target = std::stoull(m[1].str(), nullptr, 16);
    if (target >= insns[j].addr) continue;
    LoopStats s;
    bool innermost = true;
    for (std::size_t i = 0; i <= j; ++i) {
      if (insns[i].addr < target) continue;
      const std::string& t = insns[i].text;
      if (t.find("vfmadd231p") != std::string::npos || t.find("vdpbf16ps") != std::string::npos) {
        ++s.fmas;
      }
      if (is_vector_load(t)) ++s.loads;
      if (t.rfind("vpmovzxwd", 0) == 0 || t.rfind("vpslld", 0) == 0 ||
          t.rfind("vcvtph2ps", 0) == 0) {
        ++s.widenings;
      }
      if (t.rfind("cmp", 0) == 0 || t.rfind("test", 0) == 0) ++s.compares;
      if (t.rfind("prefetcht0", 0) == 0) ++s.prefetches;
      if (is_cond_jump(t)) {
        ++s.cond_jumps;
        std::smatch mi;
        if (i != j && std::regex_search(t, mi, target_re) &&
            std::stoull(mi[1].str(), nullptr, 16) < insns[i].addr) {
          innermost = false;
        }
      }
    }
    if (innermost) loops.push_back(s);
  }
  return loops;
}

LoopStats hottest_loop(const std::vector<Insn>& insns) {
  LoopStats best;
  for (const LoopStats& s : innermost_loops(insns)) {
    if (s.fmas > best.fmas) best = s;
  }
  return best;
}

// objdump spells an embedded broadcast "DWORD BCST [..]" or "DWORD PTR [..]{1to16}".
const std::regex kEmbeddedBroadcastFma(
    R"(vfmadd231ps zmm\d+,zmm\d+,(DWORD BCST \[[^\]]+\]|DWORD PTR \[[^\]]+\]\{1to16\}))");

TEST(X86CodegenText, Avx512F32FmaBroadcastsAndCleanInteriorLoops) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  for (OpKind op : {OpKind::kConv2DBackpropFilter, OpKind::kConv2DBackpropInput}) {
    // One vector per row: the broadcast rides on the FMA ({1to16}).
    Compiled narrow = compile_for(problem_of(op, DType::kFloat32, 16), cpu::Isa::kAvx512);
    ASSERT_TRUE(narrow.code);
    EXPECT_TRUE(std::regex_search(narrow.disassembly, kEmbeddedBroadcastFma)) << op_name(op);
    // Several vectors per row: one vbroadcastss feeds them all, FMAs stay register-only.
    Compiled c = compile_for(problem_of(op, DType::kFloat32, 64), cpu::Isa::kAvx512);
    ASSERT_TRUE(c.code);
    EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vbroadcastss zmm\d+,DWORD PTR)")))
        << op_name(op);
    EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vfmadd231ps zmm\d+,zmm\d+,zmm\d+)")))
        << op_name(op);
    const LoopStats s = hottest_loop(parse(c.disassembly));
    EXPECT_GE(s.fmas, 8) << op_name(op);
    // One compare and one branch close the loop; no bounds check per reduction point.
    EXPECT_EQ(s.compares, 1) << op_name(op);
    EXPECT_EQ(s.cond_jumps, 1) << op_name(op);
    EXPECT_EQ(c.code->name().rfind(fmt::format("x86_avx512_f32_{}_nhwc",
                                               op == OpKind::kConv2DBackpropFilter ? "bwd_filter" : "bwd_data"), 0),
              0u)
        << c.code->name();
  }
}

TEST(X86CodegenText, SixteenBitTypesConvertThroughF32) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  // Without avx512_bf16 (where it has it, bf16 filter gradients pair images instead),
  // bfloat16 widens by a 16-bit shift into f32 lanes, accumulates with f32 FMAs and rounds
  // back by integer arithmetic and a vpmovdw.
  cpu::CpuInfo t = target_for(cpu::Isa::kAvx512);
  t.has_avx512_bf16 = false;
  Compiled bf =
      compile_for_target(problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 32), t);
  ASSERT_TRUE(bf.code);
  EXPECT_NE(bf.disassembly.find("vpslld zmm"), std::string::npos);
  EXPECT_NE(bf.disassembly.find("vfmadd231ps zmm"), std::string::npos);
  EXPECT_NE(bf.disassembly.find("vpmovdw"), std::string::npos);
  EXPECT_EQ(bf.disassembly.find("vdpbf16ps"), std::string::npos);
  // With it, the rounding to bfloat16 is one instruction.
  t.has_avx512_bf16 = true;
  t.bf16_dot_beats_fma = true;
  Compiled native =
      compile_for_target(problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 32), t);
  ASSERT_TRUE(native.code);
  EXPECT_NE(native.disassembly.find("vcvtneps2bf16"), std::string::npos);
  Compiled h = compile_for(problem_of(OpKind::kConv2DBackpropInput, DType::kHalf, 32), cpu::Isa::kAvx512);
  ASSERT_TRUE(h.code);
  EXPECT_NE(h.disassembly.find("vcvtph2ps zmm"), std::string::npos);
  EXPECT_NE(h.disassembly.find("vcvtps2ph"), std::string::npos);
  Compiled d = compile_for(problem_of(OpKind::kConv2DBackpropInput, DType::kFloat64, 32), cpu::Isa::kAvx512);
  ASSERT_TRUE(d.code);
  EXPECT_NE(d.disassembly.find("vfmadd231pd zmm"), std::string::npos);
}

// The paired tiles' steps: each row's dword pair broadcast once (vpbroadcastd) for all of its
// vectors, so a step loads rows + vectors, not an operand per vdpbf16ps.
void expect_register_pair_steps(const Compiled& c) {
  EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vpbroadcastd zmm\d+,DWORD PTR)")))
      << c.disassembly.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vdpbf16ps zmm\d+,zmm\d+,zmm\d+)")))
      << c.disassembly.substr(0, 4000);
  const LoopStats s = hottest_loop(parse(c.disassembly));
  EXPECT_GE(s.fmas, 8);
  EXPECT_LE(2 * s.loads, s.fmas) << s.loads << " loads for " << s.fmas << " vdpbf16ps";
  EXPECT_EQ(s.compares, 1);
  EXPECT_EQ(s.cond_jumps, 1);
}

// Bfloat16 backprop data where the CPU has avx512_bf16: pairs of output channels go through
// one vdpbf16ps each, dy's pair broadcast once per row, and the hot loop converts nothing (no
// widening shifts, no f32 FMAs). The filter's pairs are packed as a transpose of dwords
// (unpacks), not element by element.
TEST(X86CodegenText, Bf16BackpropDataPairsTheReductionWithVdpbf16ps) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  cpu::CpuInfo t = target_for(cpu::Isa::kAvx512);
  t.has_avx512_bf16 = true;  // generated, not run: the host may lack it
  t.bf16_dot_beats_fma = true;  // the paired tiles, whatever the host's vdpbf16ps rate
  Compiled c = compile_for_target(problem_of(OpKind::kConv2DBackpropInput, DType::kBFloat16, 64), t);
  ASSERT_TRUE(c.code);
  EXPECT_NE(c.code->name().find("_dp2"), std::string::npos) << c.code->name();
  expect_register_pair_steps(c);
  EXPECT_NE(c.disassembly.find("vunpcklps"), std::string::npos);
  EXPECT_EQ(hottest_loop(parse(c.disassembly)).widenings, 0);
  // An odd number of output channels has no whole pairs: the widening f32 path, still exact.
  ConvProblem odd = problem_of(OpKind::kConv2DBackpropInput, DType::kBFloat16, 64);
  odd.oc = 63;
  Compiled o = compile_for_target(odd, t);
  ASSERT_TRUE(o.code);
  EXPECT_EQ(o.disassembly.find("vdpbf16ps"), std::string::npos);
  EXPECT_NE(o.disassembly.find("vfmadd231ps zmm"), std::string::npos);
}

// Bfloat16 gradients on a CPU with AMX: the data gradient's output-channel pairs and the
// filter gradient's image pairs (x's by channel, dp2t) as tdpbf16ps blocks. The hot loop
// loads row and column tiles and multiplies them, nothing else (no vector products, no
// widening); each tile configures the tile registers first and releases them last, so no
// function returns with the tile state in use. A depth that is no multiple of 16 pairs takes
// steps of a divisor of it (40 channels: 20 pairs, steps of 10).
TEST(X86CodegenText, Bf16GradientsRunThePairedTilesOnAmx) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  cpu::CpuInfo t = target_for(cpu::Isa::kAvx512);
  t.has_avx512_bf16 = true;  // generated, not run: the host may lack both
  t.has_amx_bf16 = true;
  t.bf16_dot_beats_fma = false;
  for (const auto& [op, channels] : {std::pair{OpKind::kConv2DBackpropInput, 64},
                                     {OpKind::kConv2DBackpropInput, 40},
                                     {OpKind::kConv2DBackpropFilter, 64}}) {
    Compiled c = compile_for_target(problem_of(op, DType::kBFloat16, channels), t);
    ASSERT_TRUE(c.code);
    const char* pairs = op == OpKind::kConv2DBackpropFilter ? "_dp2t" : "_dp2";
    EXPECT_NE(c.code->name().find(pairs), std::string::npos) << c.code->name();
    for (const char* insn : {"ldtilecfg", "tilezero", "tileloadd", "tdpbf16ps", "tilestored",
                             "tilerelease"}) {
      EXPECT_NE(c.disassembly.find(insn), std::string::npos) << insn;
    }
    EXPECT_EQ(c.disassembly.find("vdpbf16ps"), std::string::npos);
    const std::vector<Insn> insns = parse(c.disassembly);
    std::size_t configs = 0, releases = 0;
    for (const Insn& i : insns) {
      configs += i.text.rfind("ldtilecfg", 0) == 0 ? 1 : 0;
      releases += i.text.rfind("tilerelease", 0) == 0 ? 1 : 0;
    }
    EXPECT_GE(configs, releases);
    EXPECT_GE(releases, 1u);
    const LoopStats s = hottest_loop(insns);
    EXPECT_EQ(s.fmas, 0);
    EXPECT_EQ(s.widenings, 0);
  }
}

// A 16-bit data gradient the CPU multiplies in f32 reads its vector operand already widened
// by a copy: the packed filter (channel vectors), or the transposed dy (W-position vectors,
// 3 channels). Its hot loop widens only each row's broadcast (bf16 by a vpand of the
// broadcast word, nothing to count; f16 one vcvtph2ps per row), never the shared vectors.
TEST(X86CodegenText, SixteenBitDataGradientsReadAWidenedFilter) {
  if (!host_has(cpu::Isa::kAvx2) || !have_objdump()) GTEST_SKIP() << "needs AVX2 and objdump";
  for (const auto& [dtype, channels] : {std::pair{DType::kBFloat16, 128},
                                        {DType::kHalf, 128},
                                        {DType::kBFloat16, 3},
                                        {DType::kHalf, 3}}) {
    Compiled c =
        compile_for(problem_of(OpKind::kConv2DBackpropInput, dtype, channels), cpu::Isa::kAvx2);
    ASSERT_TRUE(c.code);
    if (channels == 3) EXPECT_NE(c.code->name().find("wvec"), std::string::npos) << c.code->name();
    const LoopStats s = hottest_loop(parse(c.disassembly));
    EXPECT_GE(s.fmas, 8) << c.code->name();
    if (dtype == DType::kBFloat16) {
      EXPECT_EQ(s.widenings, 0) << c.code->name();
    } else {
      EXPECT_LT(2 * s.widenings, s.fmas) << c.code->name();
    }
  }
}

// A 16-bit filter gradient the CPU multiplies in f32 reads both operands from per-image f32
// copies (x's rows broadcast 16 times per element here), so its hot loop converts nothing.
TEST(X86CodegenText, SixteenBitFilterGradientsReadWidenedOperands) {
  if (!host_has(cpu::Isa::kAvx2) || !have_objdump()) GTEST_SKIP() << "needs AVX2 and objdump";
  for (const DType dtype : {DType::kBFloat16, DType::kHalf}) {
    Compiled c = compile_for(problem_of(OpKind::kConv2DBackpropFilter, dtype, 64), cpu::Isa::kAvx2);
    ASSERT_TRUE(c.code);
    EXPECT_NE(c.code->name().find("_wxdy"), std::string::npos) << c.code->name();
    const LoopStats s = hottest_loop(parse(c.disassembly));
    EXPECT_GE(s.fmas, 8) << c.code->name();
    EXPECT_EQ(s.widenings, 0) << c.code->name();
  }
}

// Bfloat16 filter gradient where the CPU has avx512_bf16: the batch goes two images at a time
// (one image: two chunks of its rows) through vdpbf16ps, x's pair broadcast once per row, and
// the hot loop converts nothing.
// The pair copies interleave whole vectors: each image's 16 elements zero-extended to dwords,
// the second shifted into the high halves.
TEST(X86CodegenText, Bf16BackpropFilterPairsImagesWithVdpbf16ps) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  cpu::CpuInfo t = target_for(cpu::Isa::kAvx512);
  t.has_avx512_bf16 = true;  // generated, not run: the host may lack it
  t.bf16_dot_beats_fma = true;  // the paired tiles, whatever the host's vdpbf16ps rate
  // One thread walks both images: one pair.
  Compiled c =
      compile_for_target(problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 64), t, 1);
  ASSERT_TRUE(c.code);
  EXPECT_NE(c.code->name().find("_dp2n"), std::string::npos) << c.code->name();
  expect_register_pair_steps(c);
  EXPECT_EQ(hottest_loop(parse(c.disassembly)).widenings, 0);
  EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vpmovzxwd zmm\d+,YMMWORD PTR)")));
  EXPECT_NE(c.disassembly.find("vpord"), std::string::npos);
  // Two threads each own half of dW's output channels over both images (the filter outweighs
  // the activations): a pair each.
  Compiled sliced =
      compile_for_target(problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 64), t, 2);
  ASSERT_TRUE(sliced.code);
  EXPECT_NE(sliced.code->name().find("_slice=ocx2"), std::string::npos) << sliced.code->name();
  EXPECT_NE(sliced.code->name().find("_dp2n"), std::string::npos) << sliced.code->name();
  EXPECT_NE(sliced.disassembly.find("vdpbf16ps"), std::string::npos);
  // Where the activations outweigh dW two threads split the reduction instead; with one
  // image each no pair would form, so each takes half of the rows of both images, in pairs.
  Compiled rows = compile_for_target(
      problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 16, 56), t, 2);
  ASSERT_TRUE(rows.code);
  EXPECT_NE(rows.code->name().find("_split=ohx2"), std::string::npos) << rows.code->name();
  EXPECT_NE(rows.code->name().find("_dp2n"), std::string::npos) << rows.code->name();
  // A single image has no partner image: its row chunks pair with each other, and the hot
  // loop converts nothing.
  ConvProblem single = problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 16, 56);
  single.n = 1;
  Compiled one = compile_for_target(single, t, 1);
  ASSERT_TRUE(one.code);
  EXPECT_NE(one.code->name().find("_dp2h"), std::string::npos) << one.code->name();
  // (A tile of one vector column takes x's pair as the instruction's broadcast operand.)
  EXPECT_TRUE(std::regex_search(one.disassembly,
                                std::regex(R"(vdpbf16ps zmm\d+,zmm\d+,(zmm\d+|DWORD BCST))")));
  const LoopStats paired = hottest_loop(parse(one.disassembly));
  EXPECT_GE(paired.fmas, 8) << one.code->name();
  EXPECT_EQ(paired.widenings, 0) << one.code->name();
  // An image too small for four chunks of rows has no pair: the f32 FMAs read dy and x
  // widened once into the thread's slot, and the hot loop converts nothing.
  ConvProblem small = problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 16, 7);
  small.n = 1;
  Compiled widened = compile_for_target(small, t, 1);
  ASSERT_TRUE(widened.code);
  EXPECT_NE(widened.code->name().find("_wxdy"), std::string::npos) << widened.code->name();
  EXPECT_EQ(widened.disassembly.find("vdpbf16ps"), std::string::npos);
  const LoopStats o = hottest_loop(parse(widened.disassembly));
  EXPECT_GE(o.fmas, 8) << widened.code->name();
  EXPECT_EQ(o.widenings, 0) << widened.code->name();
  // Without avx512_bf16 the same problem keeps its widening f32 FMAs and no pair copies.
  t.has_avx512_bf16 = false;
  Compiled w =
      compile_for_target(problem_of(OpKind::kConv2DBackpropFilter, DType::kBFloat16, 64), t, 1);
  ASSERT_TRUE(w.code);
  EXPECT_EQ(w.code->name().find("_dp2n"), std::string::npos) << w.code->name();
  EXPECT_EQ(w.disassembly.find("vdpbf16ps"), std::string::npos);
}

TEST(X86CodegenText, Avx2UsesYmmOnly) {
  if (!host_has(cpu::Isa::kAvx2) || !have_objdump()) GTEST_SKIP() << "needs AVX2 and objdump";
  Compiled c = compile_for(problem_of(OpKind::kConv2DBackpropFilter, DType::kFloat32, 64), cpu::Isa::kAvx2);
  ASSERT_TRUE(c.code);
  EXPECT_NE(c.disassembly.find("vfmadd231ps ymm"), std::string::npos);
  EXPECT_EQ(c.disassembly.find("zmm"), std::string::npos);
  EXPECT_EQ(c.disassembly.find("{k"), std::string::npos);
  EXPECT_EQ(c.code->name().rfind("x86_avx2_f32_bwd_filter_nhwc", 0), 0u) << c.code->name();
  const LoopStats s = hottest_loop(parse(c.disassembly));
  EXPECT_GE(s.fmas, 4);
  EXPECT_EQ(s.compares, 1);
  EXPECT_EQ(s.cond_jumps, 1);
}

// A wide outer-product tile (the data gradient's rows of several channel vectors) keeps all
// its accumulators live and loads each operand once per reduction point, and a one-row tile
// reads its shared vectors straight from the FMA: no more load instructions than FMAs in the
// hot loop, whichever shape the schedule picks. (16-bit types convert every vector in a
// register first, so the bound is for f32.)
TEST(X86CodegenText, Avx2WideTilesLoadAtMostOncePerFma) {
  if (!host_has(cpu::Isa::kAvx2) || !have_objdump()) GTEST_SKIP() << "needs AVX2 and objdump";
  for (int c_size : {64, 128}) {
    Compiled c = compile_for(problem_of(OpKind::kConv2DBackpropInput, DType::kFloat32, c_size),
                             cpu::Isa::kAvx2);
    ASSERT_TRUE(c.code);
    const LoopStats s = hottest_loop(parse(c.disassembly));
    EXPECT_GE(s.fmas, 8) << c.code->name();
    EXPECT_LE(s.loads, s.fmas) << c.code->name();
    EXPECT_EQ(s.compares, 1) << c.code->name();
  }
}

// An output beyond the last-level cache is written with non-temporal stores behind a run-time
// check of the line alignment, and every function that streams ends with an sfence; an output
// that fits keeps plain stores.
TEST(X86CodegenText, LargeOutputsStreamPastTheCaches) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
    cpu::CpuInfo t = target_for(isa);
    const ConvProblem p = problem_of(OpKind::kConv2DBackpropInput, DType::kFloat32, 64);
    t.llc_bytes = 0;
    Compiled s = compile_for_target(p, t);
    ASSERT_TRUE(s.code);
    const char* reg = isa == cpu::Isa::kAvx512 ? "zmm" : "ymm";
    const std::regex nt_store(fmt::format(R"(vmovntps \w+ PTR \[[^\]]+\],{}\d+)", reg));
    EXPECT_TRUE(std::regex_search(s.disassembly, nt_store)) << s.code->name();
    EXPECT_TRUE(std::regex_search(s.disassembly, std::regex(R"(test\s+r8b,0x3f)")))
        << s.code->name();
    EXPECT_NE(s.disassembly.find("sfence"), std::string::npos) << s.code->name();
    EXPECT_NE(s.code->name().find("_nt"), std::string::npos) << s.code->name();
    t.llc_bytes = 1 << 30;
    Compiled c = compile_for_target(p, t);
    ASSERT_TRUE(c.code);
    EXPECT_EQ(c.disassembly.find("vmovnt"), std::string::npos) << c.code->name();
    EXPECT_EQ(c.disassembly.find("sfence"), std::string::npos) << c.code->name();
    // bfloat16 streams the rounded half-width register.
    t.llc_bytes = 0;
    Compiled b = compile_for_target(
        problem_of(OpKind::kConv2DBackpropInput, DType::kBFloat16, 64), t);
    ASSERT_TRUE(b.code);
    const std::regex half_store(fmt::format(R"(vmovntdq \w+ PTR \[[^\]]+\],{}\d+)",
                                            isa == cpu::Isa::kAvx512 ? "ymm" : "xmm"));
    EXPECT_TRUE(std::regex_search(b.disassembly, half_store)) << b.code->name();
  }
}

// A tile's per-row operand read as rows in different lines, from a buffer beyond L2 (dy of an
// 8x56x56 1x1 input gradient: 144 channels, 14 MB): the hot loop prefetches each row of the
// next row group once per pass, and the name says pf; with an L2 that holds dy, no prefetch.
// Rows 4 KiB apart (1024 float channels) share one L1 set with the next group's: only a tile of at
// most 2 rows (a remainder) prefetches there, its lines and the next group's half the set.
// The same for the paired bfloat16 tiles.
TEST(X86CodegenText, StreamedRowsPrefetchTheNextRowGroup) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  auto input_gradient_1x1 = [](DType dtype, std::int64_t ic, std::int64_t oc) {
    return batch8_56x56_1x1(OpKind::kConv2DBackpropInput, dtype, ic, oc);
  };
  // The most prefetches of an innermost loop (one per tile: the main tile's and the rest's).
  auto prefetches = [](const std::string& dis) {
    int most = 0;
    for (const LoopStats& s : innermost_loops(parse(dis))) most = std::max(most, s.prefetches);
    return most;
  };
  auto tile_rows = [](const std::string& name) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(name, m, std::regex(R"(_r(\d+)x\d+)"))) << name;
    return m.empty() ? 0 : std::stoi(m[1].str());
  };
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      cpu::CpuInfo t = target_for(isa);
      // A 32 KiB L1 whatever the host's, so that the crowded case below counts the same ways.
      t.l1_bytes = 32 << 10;
      t.l2_bytes = 1 << 20;
      if (dtype == DType::kBFloat16 && isa == cpu::Isa::kAvx512) t.bf16_dot_beats_fma = true;
      const ConvProblem p = input_gradient_1x1(dtype, 24, 144);
      Compiled c = compile_for_target(p, t);
      ASSERT_TRUE(c.code);
      const std::string& name = c.code->name();
      EXPECT_NE(name.find("_pf"), std::string::npos) << name;
      // In the main tile's reduction loop: one per row of the tile (its row groups together),
      // whatever the unroll.
      EXPECT_EQ(prefetches(c.disassembly), tile_rows(name)) << name;
      t.l2_bytes = std::int64_t{1} << 30;
      Compiled fits = compile_for_target(p, t);
      ASSERT_TRUE(fits.code);
      EXPECT_EQ(fits.code->name().find("_pf"), std::string::npos) << fits.code->name();
      EXPECT_EQ(fits.disassembly.find("prefetch"), std::string::npos) << fits.code->name();
      t.l2_bytes = 1 << 20;
      Compiled crowded =
          compile_for_target(input_gradient_1x1(dtype, 64, 4096 / dtype_size(dtype)), t);
      ASSERT_TRUE(crowded.code);
      EXPECT_GE(tile_rows(crowded.code->name()), 3) << crowded.code->name();
      EXPECT_LE(prefetches(crowded.disassembly), 2) << crowded.code->name();
    }
  }
}

// A filter gradient's tile takes a new line of x per reduction point (256 channels: 1 KiB a
// pixel; 64 in AVX2 code, whose tiles read a copy of x with more) and reads x's broadcasts
// from a buffer beyond L2 (8x56x56 f32, 6-26 MB): at every point of its hottest loop it
// prefetches the same pixel of the next row chunk (the chunk's rows of 56 pixels further), of
// x and of dy (its vectors' lines), and the name says pfb. With an L2 that holds x, or where
// the bfloat16 tiles read the paired copies, no such prefetch.
TEST(X86CodegenText, FilterGradientTilesPrefetchTheNextBlockOfX) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  auto filter_gradient_1x1 = [](DType dtype, std::int64_t ic, std::int64_t oc) {
    return batch8_56x56_1x1(OpKind::kConv2DBackpropFilter, dtype, ic, oc);
  };
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
    cpu::CpuInfo t = target_for(isa);
    t.l2_bytes = 1 << 20;
    const std::int64_t ic = isa == cpu::Isa::kAvx512 ? 256 : 64;
    const ConvProblem p = filter_gradient_1x1(DType::kFloat32, ic, 320 - ic);
    Compiled c = compile_for_target(p, t);
    ASSERT_TRUE(c.code);
    const std::string& name = c.code->name();
    EXPECT_NE(name.find("_pfb"), std::string::npos) << name;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(name, m, std::regex(R"(blk=n[,_]oh(\d+))"))) << name;
    const std::uint64_t pixel = static_cast<std::uint64_t>(ic) * 4;
    const std::uint64_t next_chunk = std::stoull(m[1].str()) * 56 * pixel;
    // One prefetch per unrolled point of the main tile's loop, a pixel apart from the next
    // chunk's first.
    const LoopStats hot = hottest_loop(parse(c.disassembly));
    EXPECT_GE(hot.prefetches, 1) << name;
    // The displacements of the prefetches off x's pointer (rsi) and dy's (rdi).
    auto distances = [&](const char* reg) {
      const std::regex prefetch(fmt::format(R"(prefetcht0 BYTE PTR \[{}\+0x([0-9a-f]+)\])", reg));
      std::set<std::uint64_t> out;
      for (auto it = std::sregex_iterator(c.disassembly.begin(), c.disassembly.end(), prefetch);
           it != std::sregex_iterator(); ++it) {
        out.insert(std::stoull((*it)[1].str(), nullptr, 16));
      }
      return out;
    };
    const std::set<std::uint64_t> x_lines = distances("rsi");
    ASSERT_FALSE(x_lines.empty()) << name;
    EXPECT_EQ(*x_lines.begin(), next_chunk) << name;
    for (std::uint64_t d : x_lines) EXPECT_EQ((d - next_chunk) % pixel, 0U) << name;
    // dy's lines too, unless the tiles read a copy of dy (AVX2 code restrides it: rsdy).
    const std::set<std::uint64_t> dy_lines = distances("rdi");
    if (std::regex_search(name, std::regex("(rs|w)x?dy"))) {
      EXPECT_TRUE(dy_lines.empty()) << name;
    } else {
      ASSERT_FALSE(dy_lines.empty()) << name;
      EXPECT_EQ(*dy_lines.begin(), next_chunk / ic * (320 - ic)) << name;
    }
    t.l2_bytes = std::int64_t{1} << 30;
    Compiled fits = compile_for_target(p, t);
    ASSERT_TRUE(fits.code);
    EXPECT_EQ(fits.code->name().find("_pfb"), std::string::npos) << fits.code->name();
    EXPECT_EQ(fits.disassembly.find("prefetch"), std::string::npos) << fits.code->name();
  }
  cpu::CpuInfo dot = target_for(cpu::Isa::kAvx512);
  dot.l2_bytes = 1 << 20;
  dot.has_avx512_bf16 = dot.bf16_dot_beats_fma = true;
  Compiled paired = compile_for_target(filter_gradient_1x1(DType::kBFloat16, 256, 64), dot);
  ASSERT_TRUE(paired.code);
  EXPECT_NE(paired.code->name().find("dp2"), std::string::npos) << paired.code->name();
  EXPECT_EQ(paired.code->name().find("_pfb"), std::string::npos) << paired.code->name();
}

// Non-temporal stores only where they write whole lines: a tile whose column groups are
// narrower than a line (AVX2's half-line vectors, one per row group beside a 7x7 filter's
// taps) leaves every row's line part-written until the next group, and those lines leave the
// write-combining buffers as partial writes. The 7x7 depthwise input gradient's whole-width
// rows (16 channels: two groups of one vector) store plainly in AVX2 code, 56 rows or 8, and
// stream in AVX-512 code (a vector per line); 2 such rows stream in both.
TEST(X86CodegenText, TilesStreamOnlyGroupsOfWholeLines) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  auto depthwise = [](DType dtype, std::int64_t hw, std::int64_t c, std::int64_t k,
                      std::int64_t stride) {
    OpDescriptor d;
    d.op = OpKind::kDepthwiseConv2dNativeBackpropInput;
    d.dtype = dtype;
    d.input = {1, hw, hw, c};
    d.filter = {k, k, c, 1};
    d.strides = {1, stride, stride, 1};
    d.padding = Padding::kSame;
    d.out_backprop = {1, hw / stride, hw / stride, c};
    Expected<ConvProblem> p = validate(d);
    EXPECT_TRUE(p.has_value()) << p.status().to_string();
    return *p;
  };
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
    cpu::CpuInfo t = target_for(isa);
    t.llc_bytes = 0;  // every output past the caches
    Compiled wide = compile_for_target(depthwise(DType::kFloat32, 56, 16, 7, 1), t);
    ASSERT_TRUE(wide.code);
    EXPECT_NE(wide.code->name().find("wrow_r56x16e"), std::string::npos) << wide.code->name();
    EXPECT_EQ(wide.disassembly.find("vmovntps") != std::string::npos, isa == cpu::Isa::kAvx512)
        << wide.code->name();
    // The same tile over an 8-wide image: 8 rows.
    Compiled few = compile_for_target(depthwise(DType::kFloat32, 8, 16, 7, 1), t);
    ASSERT_TRUE(few.code);
    EXPECT_NE(few.code->name().find("wrow_r8x16e"), std::string::npos) << few.code->name();
    EXPECT_EQ(few.disassembly.find("vmovntps") != std::string::npos, isa == cpu::Isa::kAvx512)
        << few.code->name();
    // And over a 2-wide image: 2 rows.
    Compiled two = compile_for_target(depthwise(DType::kFloat32, 2, 16, 7, 1), t);
    ASSERT_TRUE(two.code);
    EXPECT_NE(two.code->name().find("wrow_r2x16e"), std::string::npos) << two.code->name();
    EXPECT_NE(two.disassembly.find("vmovntps"), std::string::npos) << two.code->name();
  }
}

// The NCHW depthwise input gradient at stride 2 with an even filter width: dy's columns are
// repeated by vpermps, a vector per output vector, instead of W residues (whose tiles stored
// every other column lane by lane; cpu_copy_pass_text_test checks the tiles' columns are
// contiguous).
TEST(X86CodegenText, NchwDepthwiseStride2RepeatsColumnsWithVpermps) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  OpDescriptor d;
  d.op = OpKind::kDepthwiseConv2dNativeBackpropInput;
  d.data_format = DataFormat::kNCHW;
  d.input = {2, 8, 30, 30};
  d.filter = {4, 4, 8, 1};
  d.strides = {1, 1, 2, 2};
  d.padding = Padding::kSame;
  d.out_backprop = {2, 8, 15, 15};
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    d.dtype = dtype;
    Expected<ConvProblem> p = validate(d);
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
      if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
      Compiled c = compile_for(*p, isa);
      ASSERT_TRUE(c.code);
      const char* reg = isa == cpu::Isa::kAvx512 ? "zmm" : "ymm";
      EXPECT_TRUE(std::regex_search(
          c.disassembly, std::regex(fmt::format(R"(vpermps {0}\d+,{0}\d+,{0}\d+)", reg))))
          << c.code->name();
      EXPECT_NE(c.code->name().find("dyp2"), std::string::npos) << c.code->name();
      EXPECT_EQ(c.code->name().find("res2x2"), std::string::npos) << c.code->name();
    }
  }
}

// NCHW input gradients run the NHWC schedule between two channels-last copies; those copies
// transpose 8x8 blocks in registers (unpcklps/unpckhps then unpcklpd/unpckhpd, rows loaded
// as 128-bit halves) instead of gathering lane by lane.
TEST(X86CodegenText, ChannelsLastCopiesTransposeInRegisters) {
  if (!have_objdump()) GTEST_SKIP() << "needs objdump";
  ConvProblem p = problem_of(OpKind::kConv2DBackpropInput, DType::kFloat32, 32);
  p.format = DataFormat::kNCHW;
  for (cpu::Isa isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2}) {
    if (isa == cpu::Isa::kAvx2 && !host_has(isa)) continue;
    Compiled c = compile_for(p, isa);
    ASSERT_TRUE(c.code);
    EXPECT_NE(c.code->name().find("tonhwc"), std::string::npos) << c.code->name();
    EXPECT_TRUE(
        std::regex_search(c.disassembly, std::regex(R"(vinsertf128 ymm\d+,ymm\d+,XMMWORD PTR)")))
        << c.code->name();
    EXPECT_TRUE(std::regex_search(c.disassembly, std::regex(R"(vunpckhpd ymm\d+,ymm\d+,ymm\d+)")))
        << c.code->name();
    EXPECT_EQ(c.disassembly.find("vinsertps"), std::string::npos) << c.code->name();
  }
}

// The mapping holding the code must be readable and executable, never writable.
TEST(X86CodegenText, CodePagesAreNotWritable) {
  const cpu::Isa isa = host_has(cpu::Isa::kAvx512) ? cpu::Isa::kAvx512 : cpu::Isa::kAvx2;
  if (!host_has(isa)) GTEST_SKIP() << "needs AVX2";
  Compiled c = compile_for(problem_of(OpKind::kConv2DBackpropInput, DType::kFloat32, 16), isa);
  ASSERT_TRUE(c.code);
  const auto addr = reinterpret_cast<std::uintptr_t>(c.code->code_bytes().data());
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (addr < lo || addr >= hi) continue;
    found = true;
    EXPECT_EQ(perms[0], 'r') << line;
    EXPECT_EQ(perms[1], '-') << "generated code is writable: " << line;
    EXPECT_EQ(perms[2], 'x') << line;
  }
  EXPECT_TRUE(found);
  EXPECT_GT(c.code->code_bytes().size(), 0u);
}

}  // namespace
}  // namespace convjit::codegen
