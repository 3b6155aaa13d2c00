// The implicit-GEMM kernel on FFMA register tiles: a CTA computes a tile_m x tile_n block of C,
// staging tile_k-deep slices of A and B in shared memory (converted to the accumulation type);
// each thread owns a micro_m x micro_n register tile.
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

void emit_ffma_gemm_kernel(CodeWriter& out, const CudaPlan& plan, const GemmSpec& s,
                           CudaLaunch* launch, GemmCtaForm* form) {
  const int tm = plan.tile_m, tn = plan.tile_n, tk = plan.tile_k;
  const int threads = plan.threads;
  const int cols = tn / plan.micro_n;  // threads along N
  const std::int64_t tiles_n = ceil_div(s.n, tn);
  launch->symbol = s.symbol;
  launch->block = {static_cast<std::uint32_t>(threads), 1, 1};
  launch->grid = {static_cast<std::uint32_t>(ceil_div(s.m, tm)),
                  static_cast<std::uint32_t>(tiles_n * plan.problem.groups),
                  static_cast<std::uint32_t>(s.split_k)};
  launch->shared_bytes = plan.shared_bytes();

  emit_gemm_offsets(out, s);
  out.line("// CTA tile {}x{}x{}, {} threads each with a {}x{} register tile{}.", tm, tn, tk,
           threads, plan.micro_m, plan.micro_n,
           s.split_k > 1 ? "; K split into slices written to the workspace" : "");
  form->shared_type = "acc_t";
  form->a_elements = tk * tm;
  form->b_elements = tk * tn;
  if (form->cta_function) {
    out.open("CJ_DEVICE void {}_cta(const cj_args& args, cj_index block_m, acc_t* a_tile, "
             "acc_t* b_tile)",
             s.symbol);
  } else {
    out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", threads, s.symbol);
  }
  out.line("const elem_t* __restrict__ a_src = static_cast<const elem_t*>(args.{});", s.a);
  out.line("const elem_t* __restrict__ b_src = static_cast<const elem_t*>(args.{});", s.b);
  if (s.split_k > 1) {
    out.line("acc_t* __restrict__ c_dst = static_cast<acc_t*>(args.workspace);");
  } else {
    out.line("elem_t* __restrict__ c_dst = static_cast<elem_t*>(args.{});", s.c);
  }
  out.line("constexpr cj_index kM = {}, kN = {}, kK = {}, kKPerSplit = {};", s.m, s.n, s.k,
           s.k_per_split);
  if (!form->cta_function) {
    out.line("CJ_SHARED(acc_t, a_tile, {});  // [k][m]", tk * tm);
    out.line("CJ_SHARED(acc_t, b_tile, {});  // [k][n]", tk * tn);
  }
  out.line("const int tid = threadIdx.x;");
  out.line("const cj_index group = blockIdx.y / {};", tiles_n);
  out.line("const cj_index tile_m = cj_index({}) * {};",
           form->cta_function ? "block_m" : "blockIdx.x", tm);
  out.line("const cj_index tile_n = cj_index(blockIdx.y % {}) * {};", tiles_n, tn);
  out.line("const cj_index k_begin = cj_index(blockIdx.z) * kKPerSplit;");
  out.line("const cj_index k_end = k_begin + kKPerSplit < kK ? k_begin + kKPerSplit : kK;");
  out.line("const int thread_m = (tid / {}) * {};", cols, plan.micro_m);
  out.line("const int thread_n = (tid % {}) * {};", cols, plan.micro_n);
  out.line("acc_t acc[{}][{}];", plan.micro_m, plan.micro_n);
  out.line("CJ_UNROLL");
  out.line("for (int i = 0; i < {}; ++i)", plan.micro_m);
  out.line("  CJ_UNROLL");
  out.line("  for (int j = 0; j < {}; ++j) acc[i][j] = 0;", plan.micro_n);
  out.open("for (cj_index k0 = k_begin; k0 < k_end; k0 += {})", tk);
  // A slice: m fastest across threads.
  out.open("for (int e = tid; e < {}; e += {})", tm * tk, threads);
  out.line("const int mm = e % {}, kk = e / {};", tm, tm);
  out.line("const cj_index m = tile_m + mm, k = k0 + kk;");
  out.line("acc_t v = 0;");
  out.open("if (m < kM && k < k_end)");
  out.line("const cj_index offset = {}_a_offset(group, m, k);", s.tag);
  out.line("if (offset >= 0) v = to_acc(CJ_LDG(a_src, offset));");
  out.close();
  out.line("CJ_STS(a_tile, kk * {} + mm, v);", tm);
  out.close();
  out.open("for (int e = tid; e < {}; e += {})", tn * tk, threads);
  out.line("const int nn = e % {}, kk = e / {};", tn, tn);
  out.line("const cj_index col = tile_n + nn, k = k0 + kk;");
  out.line("acc_t v = 0;");
  out.open("if (col < kN && k < k_end)");
  out.line("const cj_index offset = {}_b_offset(group, k, col);", s.tag);
  out.line("if (offset >= 0) v = to_acc(CJ_LDG(b_src, offset));");
  out.close();
  out.line("CJ_STS(b_tile, kk * {} + nn, v);", tn);
  out.close();
  out.line("__syncthreads();");
  out.line("CJ_UNROLL");
  out.open("for (int kk = 0; kk < {}; ++kk)", tk);
  out.line("acc_t a[{}], b[{}];", plan.micro_m, plan.micro_n);
  out.line("CJ_UNROLL");
  out.line("for (int i = 0; i < {}; ++i) a[i] = CJ_LDS(a_tile, kk * {} + thread_m + i);",
           plan.micro_m, tm);
  out.line("CJ_UNROLL");
  out.line("for (int j = 0; j < {}; ++j) b[j] = CJ_LDS(b_tile, kk * {} + thread_n + j);",
           plan.micro_n, tn);
  out.line("CJ_UNROLL");
  out.line("for (int i = 0; i < {}; ++i)", plan.micro_m);
  out.line("  CJ_UNROLL");
  out.line("  for (int j = 0; j < {}; ++j) acc[i][j] = cj_fma(a[i], b[j], acc[i][j]);",
           plan.micro_n);
  out.close();
  out.line("__syncthreads();");
  out.close();
  // Epilogue.
  out.line("CJ_UNROLL");
  out.open("for (int i = 0; i < {}; ++i)", plan.micro_m);
  out.line("const cj_index m = tile_m + thread_m + i;");
  out.line("if (m >= kM) break;");
  out.line("CJ_UNROLL");
  out.open("for (int j = 0; j < {}; ++j)", plan.micro_n);
  out.line("const cj_index col = tile_n + thread_n + j;");
  out.line("if (col >= kN) break;");
  if (s.split_k > 1) {
    out.line(
        "CJ_STG(c_dst, cj_index(blockIdx.z) * kWElements + {}_c_offset(group, m, col), acc[i][j]);",
        s.tag);
  } else {
    out.line("CJ_STG(c_dst, {}_c_offset(group, m, col), from_acc(acc[i][j]));", s.tag);
  }
  out.close();
  out.close();
  out.close();
  out.blank();
}

}  // namespace convjit::codegen::cuda_gen
