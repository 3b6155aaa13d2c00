// The implicit-GEMM kernel on FFMA register tiles: a CTA computes a tile_m x tile_n block of C,
// staging tile_k-deep slices of A and B in shared memory (converted to the accumulation type);
// each thread owns a micro_m x micro_n register tile. Every slice goes global -> registers ->
// shared. With two stages (the plan's default wherever the reduction has two slices or more)
// shared memory holds two slices: the next slice's global loads are issued before the current
// one is multiplied and stored into the other stage after it, so their latency hides behind
// the FMAs and one barrier per slice suffices (a stage is rewritten only after the barrier
// that ends the slice which read it).
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// How one operand's slice is copied: threads walk `extent` (m or n) fastest, or k fastest
// where the tensor's unit stride runs along k (NHWC dy and w of the input gradient), so a warp
// reads consecutive addresses either way. The slice is [k][row] in shared memory either way
// (the FMA loop reads micro_m or micro_n consecutive elements of a row); rows copied k-fastest
// are padded (CudaPlan::shared_row) so the eight rows a warp's stores hit lie in different banks.
struct SliceCopy {
  char name;           // 'a' or 'b'
  int extent;          // tile_m or tile_n
  int row;             // elements per shared row
  bool k_fastest;
  const char* bound;   // kM or kN
  const char* offset;  // the offset function's arguments
};

int per_thread(const SliceCopy& c, int tk, int threads) {
  return static_cast<int>(ceil_div(c.extent * tk, threads));
}

// Element r of this thread: e = tid + r * threads of the slice, as (mn, kk).
void emit_element(CodeWriter& out, const SliceCopy& c, int tk, int threads) {
  out.line("const int e = tid + r * {};", threads);
  if (c.k_fastest) {
    out.line("const int kk = e % {}, mn = e / {};", tk, tk);
  } else {
    out.line("const int mn = e % {}, kk = e / {};", c.extent, c.extent);
  }
}

// This thread's elements of the slices at reduction step `k0` into a_next and b_next (zero
// outside the GEMM and at padding taps).
void emit_slice_loads(CodeWriter& out, const GemmSpec& s, const SliceCopy (&copies)[2], int tk,
                      int threads, const std::string& k0) {
  for (const SliceCopy& c : copies) {
    out.line("CJ_UNROLL");
    out.open("for (int r = 0; r < {}; ++r)", per_thread(c, tk, threads));
    emit_element(out, c, tk, threads);
    out.line("const cj_index row = tile_{} + mn, k = {} + kk;", c.name == 'a' ? 'm' : 'n', k0);
    out.line("acc_t v = 0;");
    if (c.extent * tk % threads == 0) {
      out.open("if (row < {} && k < k_end)", c.bound);
    } else {
      out.open("if (e < {} && row < {} && k < k_end)", c.extent * tk, c.bound);
    }
    out.line("const cj_index offset = {}_{}_offset({});", s.tag, c.name, c.offset);
    out.line("if (offset >= 0) v = to_acc(CJ_LDG({}_src, offset));", c.name);
    out.close();
    out.line("{}_next[r] = v;", c.name);
    out.close();
  }
}

// Those elements into shared stage `stage`.
void emit_slice_stores(CodeWriter& out, const SliceCopy (&copies)[2], int tk, int threads,
                       const std::string& stage) {
  for (const SliceCopy& c : copies) {
    out.line("CJ_UNROLL");
    out.open("for (int r = 0; r < {}; ++r)", per_thread(c, tk, threads));
    if (!c.k_fastest && c.row == c.extent) {
      // [k][m] unpadded: the slice's element e is at e.
      out.line("const int e = tid + r * {};", threads);
      if (c.extent * tk % threads != 0) out.line("if (e >= {}) break;", c.extent * tk);
      out.line("CJ_STS({}_tile, ({}) * {} + e, {}_next[r]);", c.name, stage, tk * c.row, c.name);
    } else {
      emit_element(out, c, tk, threads);
      if (c.extent * tk % threads != 0) out.line("if (e >= {}) break;", c.extent * tk);
      out.line("CJ_STS({}_tile, ({}) * {} + kk * {} + mn, {}_next[r]);", c.name, stage,
               tk * c.row, c.row, c.name);
    }
    out.close();
  }
}
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
  form->a_elements = plan.stages * tk * plan.shared_row(true);
  form->b_elements = plan.stages * tk * plan.shared_row(false);
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
    out.line("CJ_SHARED(acc_t, a_tile, {});  // [stage][k][row of m]", form->a_elements);
    out.line("CJ_SHARED(acc_t, b_tile, {});  // [stage][k][row of n]", form->b_elements);
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
  const int stages = plan.stages;
  const SliceCopy copies[2] = {
      {'a', tm, plan.shared_row(true), plan.operand_a.k_contiguous, "kM", "group, row, k"},
      {'b', tn, plan.shared_row(false), plan.operand_b.k_contiguous, "kN", "group, k, row"}};
  out.line("acc_t a_next[{}], b_next[{}];  // this thread's elements of the next slice",
           per_thread(copies[0], tk, threads), per_thread(copies[1], tk, threads));
  // One slice: multiplied from `a_stage` and `b_stage` (constant offsets into the shared
  // tiles, so the compiler sees the rows' alignment and reads micro_m or micro_n elements as
  // vectors).
  auto emit_products = [&](int stage) {
    out.line("CJ_UNROLL");
    out.open("for (int kk = 0; kk < {}; ++kk)", tk);
    out.line("acc_t a[{}], b[{}];", plan.micro_m, plan.micro_n);
    out.line("CJ_UNROLL");
    out.line("for (int i = 0; i < {}; ++i) a[i] = CJ_LDS(a_tile, {} + kk * {} + thread_m + i);",
             plan.micro_m, stage * tk * copies[0].row, copies[0].row);
    out.line("CJ_UNROLL");
    out.line("for (int j = 0; j < {}; ++j) b[j] = CJ_LDS(b_tile, {} + kk * {} + thread_n + j);",
             plan.micro_n, stage * tk * copies[1].row, copies[1].row);
    out.line("CJ_UNROLL");
    out.line("for (int i = 0; i < {}; ++i)", plan.micro_m);
    out.line("  CJ_UNROLL");
    out.line("  for (int j = 0; j < {}; ++j) acc[i][j] = cj_fma(a[i], b[j], acc[i][j]);",
             plan.micro_n);
    out.close();
  };
  if (stages == 1) {
    out.open("for (cj_index k0 = k_begin; k0 < k_end; k0 += {})", tk);
    emit_slice_loads(out, s, copies, tk, threads, "k0");
    emit_slice_stores(out, copies, tk, threads, "0");
    out.line("__syncthreads();");
    emit_products(0);
    out.line("__syncthreads();");
    out.close();
  } else {
    // The loop walks two slices per trip, the first from stage 0 and the second from stage 1,
    // so each stage's offset is a constant.
    emit_slice_loads(out, s, copies, tk, threads, "k_begin");
    emit_slice_stores(out, copies, tk, threads, "0");
    out.line("__syncthreads();");
    out.open("for (cj_index k0 = k_begin; k0 < k_end; k0 += {})", 2 * tk);
    for (int stage = 0; stage < 2; ++stage) {
      const std::string k = stage == 0 ? "k0" : fmt::format("k0 + {}", tk);
      out.line("// The slice at {} from stage {}, the next one loaded into stage {}.", k, stage,
               1 - stage);
      if (stage == 1) out.line("if ({} >= k_end) break;", k);
      out.line("const bool more{} = {} + {} < k_end;", stage, k, tk);
      out.open("if (more{})", stage);
      emit_slice_loads(out, s, copies, tk, threads, fmt::format("{} + {}", k, tk));
      out.close();
      emit_products(stage);
      out.open("if (more{})", stage);
      emit_slice_stores(out, copies, tk, threads, std::to_string(1 - stage));
      out.close();
      out.line("__syncthreads();");
    }
    out.close();
  }
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
