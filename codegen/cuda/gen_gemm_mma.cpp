// The implicit-GEMM kernel on tensor cores (mma.sync). A CTA of warps_m x warps_n warps
// computes a tile_m x tile_n block of C; each warp owns a grid of mma fragments.
//   f16/bf16: operands gathered into shared memory as 16-bit rows, fragments read with
//             ldmatrix, mma.m16n8k16 with f32 accumulators.
//   tf32/f64: operands copied into shared memory with cp.async (zero-fill for padding) in a
//             `stages`-deep pipeline; fragments read from shared memory, mma.m16n8k8 (tf32,
//             rounded from f32 in registers) or mma.m8n8k4 (f64).
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct MmaShape {
  int frag_m, frag_k;
  int pad;           // elements of padding per shared row
  int acc_per_lane;  // accumulators per lane per fragment
  const char* smem_type;
};

MmaShape mma_shape(CudaMath math) {
  switch (math) {
    case CudaMath::kMmaF16:
    case CudaMath::kMmaBf16:
      return {16, 16, 8, 4, "unsigned short"};
    case CudaMath::kMmaTf32:
      return {16, 8, 4, 4, "float"};
    default:
      return {8, 4, 1, 2, "double"};
  }
}

void emit_sixteen_bit_loads(CodeWriter& out, const GemmSpec& s, int tm, int tn, int tk, int row,
                            int threads) {
  out.open("for (int e = tid; e < {}; e += {})", tm * tk, threads);
  out.line("const int kk = e % {}, mm = e / {};", tk, tk);
  out.line("const cj_index m = tile_m + mm, k = k0 + kk;");
  out.line("const cj_index offset = m < kM && k < k_end ? {}_a_offset(group, m, k) : -1;", s.tag);
  out.line(
      "CJ_STS(a_tile, mm * {} + kk, offset >= 0 ? CJ_LDG(a_src, offset).bits : (unsigned short)0);",
      row);
  out.close();
  out.open("for (int e = tid; e < {}; e += {})", tn * tk, threads);
  out.line("const int kk = e % {}, nn = e / {};", tk, tk);
  out.line("const cj_index col = tile_n + nn, k = k0 + kk;");
  out.line("const cj_index offset = col < kN && k < k_end ? {}_b_offset(group, k, col) : -1;",
           s.tag);
  out.line(
      "CJ_STS(b_tile, nn * {} + kk, offset >= 0 ? CJ_LDG(b_src, offset).bits : (unsigned short)0);",
      row);
  out.close();
}

void emit_async_stage_loader(CodeWriter& out, const GemmSpec& s, int tm, int tn, int tk, int row,
                             int threads, int bytes) {
  out.line("// Copies the k0 slice into `stage` (cp.async; padding and tails zero-filled).");
  out.open("auto load_stage = [&](int stage, cj_index k0)");
  out.open("for (int e = tid; e < {}; e += {})", tm * tk, threads);
  out.line("const int kk = e % {}, mm = e / {};", tk, tk);
  out.line("const cj_index m = tile_m + mm, k = k0 + kk;");
  out.line("const cj_index offset = m < kM && k < k_end ? {}_a_offset(group, m, k) : -1;", s.tag);
  out.line(
      "cj_cp_async_{}(&a_tile[(stage * {} + mm) * {} + kk], a_src + (offset >= 0 ? offset : 0),",
      bytes, tm, row);
  out.line("               offset >= 0 ? {} : 0);", bytes);
  out.close();
  out.open("for (int e = tid; e < {}; e += {})", tn * tk, threads);
  out.line("const int kk = e % {}, nn = e / {};", tk, tk);
  out.line("const cj_index col = tile_n + nn, k = k0 + kk;");
  out.line("const cj_index offset = col < kN && k < k_end ? {}_b_offset(group, k, col) : -1;",
           s.tag);
  out.line(
      "cj_cp_async_{}(&b_tile[(stage * {} + nn) * {} + kk], b_src + (offset >= 0 ? offset : 0),",
      bytes, tn, row);
  out.line("               offset >= 0 ? {} : 0);", bytes);
  out.close();
  out.close("};");
}

}  // namespace

void emit_mma_gemm_kernel(CodeWriter& out, const CudaPlan& plan, const GemmSpec& s,
                          CudaLaunch* launch) {
  const MmaShape shape = mma_shape(plan.math);
  const int tm = plan.tile_m, tn = plan.tile_n, tk = plan.tile_k;
  const int threads = plan.threads;
  const int row = tk + shape.pad;
  const int wtm = tm / plan.warps_m, wtn = tn / plan.warps_n;
  const int fm_count = wtm / shape.frag_m, fn_count = wtn / 8;
  const int stages = plan.stages;
  const bool sixteen_bit = plan.math == CudaMath::kMmaF16 || plan.math == CudaMath::kMmaBf16;
  const std::int64_t tiles_n = ceil_div(s.n, tn);
  launch->symbol = s.symbol;
  launch->block = {static_cast<std::uint32_t>(threads), 1, 1};
  launch->grid = {static_cast<std::uint32_t>(ceil_div(s.m, tm)),
                  static_cast<std::uint32_t>(tiles_n * plan.problem.groups),
                  static_cast<std::uint32_t>(s.split_k)};
  launch->shared_bytes = plan.shared_bytes();

  emit_gemm_offsets(out, s);
  out.line("// CTA tile {}x{}x{} on {}x{} warps, each {} x {} fragments of {}x8x{}{}.", tm, tn, tk,
           plan.warps_m, plan.warps_n, fm_count, fn_count, shape.frag_m, shape.frag_k,
           stages > 1 ? fmt::format("; {}-stage cp.async pipeline", stages) : std::string());
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", threads, s.symbol);
  out.line("const elem_t* __restrict__ a_src = static_cast<const elem_t*>(args.{});", s.a);
  out.line("const elem_t* __restrict__ b_src = static_cast<const elem_t*>(args.{});", s.b);
  if (s.split_k > 1) {
    out.line("acc_t* __restrict__ c_dst = static_cast<acc_t*>(args.workspace);");
  } else {
    out.line("elem_t* __restrict__ c_dst = static_cast<elem_t*>(args.{});", s.c);
  }
  out.line("constexpr cj_index kM = {}, kN = {}, kK = {}, kKPerSplit = {};", s.m, s.n, s.k,
           s.k_per_split);
  out.line("CJ_SHARED({}, a_tile, {});  // [stage][m][k], rows of {}", shape.smem_type,
           stages * tm * row, row);
  out.line("CJ_SHARED({}, b_tile, {});  // [stage][n][k], rows of {}", shape.smem_type,
           stages * tn * row, row);
  out.line("const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;");
  out.line("const int warp_m = (warp % {}) * {}, warp_n = (warp / {}) * {};", plan.warps_m, wtm,
           plan.warps_m, wtn);
  out.line("const cj_index group = blockIdx.y / {};", tiles_n);
  out.line("const cj_index tile_m = cj_index(blockIdx.x) * {};", tm);
  out.line("const cj_index tile_n = cj_index(blockIdx.y % {}) * {};", tiles_n, tn);
  out.line("const cj_index k_begin = cj_index(blockIdx.z) * kKPerSplit;");
  out.line("const cj_index k_end = k_begin + kKPerSplit < kK ? k_begin + kKPerSplit : kK;");
  out.line("acc_t acc[{}][{}][{}];", fm_count, fn_count, shape.acc_per_lane);
  out.line("CJ_UNROLL");
  out.line("for (int i = 0; i < {}; ++i)", fm_count);
  out.line("  CJ_UNROLL");
  out.line("  for (int j = 0; j < {}; ++j)", fn_count);
  out.line("    CJ_UNROLL");
  out.line("    for (int r = 0; r < {}; ++r) acc[i][j][r] = 0;", shape.acc_per_lane);

  if (sixteen_bit) {
    const char* mma =
        plan.math == CudaMath::kMmaF16 ? "cj_mma_m16n8k16_f16" : "cj_mma_m16n8k16_bf16";
    out.open("for (cj_index k0 = k_begin; k0 < k_end; k0 += {})", tk);
    emit_sixteen_bit_loads(out, s, tm, tn, tk, row, threads);
    out.line("__syncthreads();");
    out.line("CJ_UNROLL");
    out.open("for (int ks = 0; ks < {}; ks += 16)", tk);
    out.line("unsigned a_frag[{}][4], b_frag[{}][2];", fm_count, fn_count);
    out.line("CJ_UNROLL");
    out.line("for (int i = 0; i < {}; ++i)", fm_count);
    out.line(
        "  cj_ldmatrix_x4(a_frag[i], &a_tile[(warp_m + i * 16 + lane % 16) * {} + ks + (lane / 16) "
        "* 8]);",
        row);
    out.line("CJ_UNROLL");
    out.line("for (int j = 0; j < {}; ++j)", fn_count);
    out.line(
        "  cj_ldmatrix_x2(b_frag[j], &b_tile[(warp_n + j * 8 + lane % 8) * {} + ks + ((lane / 8) % "
        "2) * 8]);",
        row);
    out.line("CJ_UNROLL");
    out.line("for (int i = 0; i < {}; ++i)", fm_count);
    out.line("  CJ_UNROLL");
    out.line("  for (int j = 0; j < {}; ++j) {}(acc[i][j], a_frag[i], b_frag[j]);", fn_count, mma);
    out.close();
    out.line("__syncthreads();");
    out.close();
  } else {
    const bool f64 = plan.math == CudaMath::kMmaF64;
    emit_async_stage_loader(out, s, tm, tn, tk, row, threads, f64 ? 8 : 4);
    out.line("const cj_index k_tiles = (k_end - k_begin + {}) / {};", tk - 1, tk);
    if (stages > 1) {
      out.line("CJ_UNROLL");
      out.open("for (int stage = 0; stage < {}; ++stage)", stages - 1);
      out.line("if (stage < k_tiles) load_stage(stage, k_begin + stage * {});", tk);
      out.line("cj_cp_async_commit();");
      out.close();
    }
    out.open("for (cj_index t = 0; t < k_tiles; ++t)");
    out.line("const cj_index next = t + {};", stages - 1);
    out.line("if (next < k_tiles) load_stage(int(next % {}), k_begin + next * {});", stages, tk);
    out.line("cj_cp_async_commit();");
    out.line("cj_cp_async_wait<{}>();  // slice t has landed", stages - 1);
    out.line("__syncthreads();");
    out.line("const int a_base = int(t % {}) * {}, b_base = int(t % {}) * {};", stages, tm, stages,
             tn);
    out.line("CJ_UNROLL");
    if (f64) {
      out.open("for (int ks = 0; ks < {}; ks += 4)", tk);
      out.line("double a_frag[{}], b_frag[{}];", fm_count, fn_count);
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line(
          "  a_frag[i] = CJ_LDS(a_tile, (a_base + warp_m + i * 8 + lane / 4) * {} + ks + lane % "
          "4);",
          row);
      out.line("CJ_UNROLL");
      out.line("for (int j = 0; j < {}; ++j)", fn_count);
      out.line(
          "  b_frag[j] = CJ_LDS(b_tile, (b_base + warp_n + j * 8 + lane / 4) * {} + ks + lane % "
          "4);",
          row);
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  CJ_UNROLL");
      out.line("  for (int j = 0; j < {}; ++j) cj_mma_m8n8k4_f64(acc[i][j], a_frag[i], b_frag[j]);",
               fn_count);
      out.close();
    } else {
      out.open("for (int ks = 0; ks < {}; ks += 8)", tk);
      out.line("unsigned a_frag[{}][4], b_frag[{}][2];", fm_count, fn_count);
      out.line("CJ_UNROLL");
      out.open("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("const int r0 = (a_base + warp_m + i * 16 + lane / 4) * {}, r8 = r0 + 8 * {};", row,
               row);
      out.line("const int k = ks + lane % 4;");
      out.line("a_frag[i][0] = cj_f32_to_tf32(CJ_LDS(a_tile, r0 + k));");
      out.line("a_frag[i][1] = cj_f32_to_tf32(CJ_LDS(a_tile, r8 + k));");
      out.line("a_frag[i][2] = cj_f32_to_tf32(CJ_LDS(a_tile, r0 + k + 4));");
      out.line("a_frag[i][3] = cj_f32_to_tf32(CJ_LDS(a_tile, r8 + k + 4));");
      out.close();
      out.line("CJ_UNROLL");
      out.open("for (int j = 0; j < {}; ++j)", fn_count);
      out.line("const int n0 = (b_base + warp_n + j * 8 + lane / 4) * {};", row);
      out.line("b_frag[j][0] = cj_f32_to_tf32(CJ_LDS(b_tile, n0 + ks + lane % 4));");
      out.line("b_frag[j][1] = cj_f32_to_tf32(CJ_LDS(b_tile, n0 + ks + lane % 4 + 4));");
      out.close();
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  CJ_UNROLL");
      out.line(
          "  for (int j = 0; j < {}; ++j) cj_mma_m16n8k8_tf32(acc[i][j], a_frag[i], b_frag[j]);",
          fn_count);
      out.close();
    }
    out.line("__syncthreads();  // the stage is free for the next copy");
    out.close();
    out.line("cj_cp_async_wait<0>();");
  }

  // Epilogue: the accumulator fragment layout (PTX ISA): lane / 4 is the row within 8,
  // (lane % 4) * 2 + (r % 2) the column; m16 fragments hold rows +8 in r = 2, 3.
  out.line("CJ_UNROLL");
  out.open("for (int i = 0; i < {}; ++i)", fm_count);
  out.line("CJ_UNROLL");
  out.open("for (int j = 0; j < {}; ++j)", fn_count);
  out.line("CJ_UNROLL");
  out.open("for (int r = 0; r < {}; ++r)", shape.acc_per_lane);
  if (shape.frag_m == 16) {
    out.line("const cj_index m = tile_m + warp_m + i * 16 + lane / 4 + (r / 2) * 8;");
  } else {
    out.line("const cj_index m = tile_m + warp_m + i * 8 + lane / 4;");
  }
  out.line("const cj_index col = tile_n + warp_n + j * 8 + (lane % 4) * 2 + r % 2;");
  out.line("if (m >= kM || col >= kN) continue;");
  if (s.split_k > 1) {
    out.line(
        "CJ_STG(c_dst, cj_index(blockIdx.z) * kWElements + {}_c_offset(group, m, col), "
        "acc[i][j][r]);",
        s.tag);
  } else {
    out.line("CJ_STG(c_dst, {}_c_offset(group, m, col), from_acc(acc[i][j][r]));", s.tag);
  }
  out.close();
  out.close();
  out.close();
  out.close();
  out.blank();
}

}  // namespace convjit::codegen::cuda_gen
