// The implicit-GEMM kernel on tensor cores (mma.sync). A CTA of warps_m x warps_n warps
// computes a tile_m x tile_n block of C; each warp owns a grid of mma fragments. The operands
// go through a `stages`-deep cp.async pipeline: while the warps multiply slice t, the copies of
// slices t+1 .. t+stages-1 are in flight. Each operand's shared tile keeps the tensor's memory
// order (CudaOperandTile): rows of k, or rows of m/n read back transposed, filled by 16-byte
// cp.async runs (zero-filled where the run is padding or past the tile's edge) or element by
// element where runs are not whole or the tensor is not 16-byte aligned.
//   f16/bf16: fragments by ldmatrix (.trans for rows of m/n), mma.m16n8k16, f32 accumulators.
//   tf32: fragments read from shared memory and rounded in registers, mma.m16n8k8.
//   f64: mma.m8n8k4 (DMMA).
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct MmaShape {
  int frag_m, frag_k;
  int acc_per_lane;  // accumulators per lane per fragment
  const char* smem_type;
};

MmaShape mma_shape(CudaMath math) {
  switch (math) {
    case CudaMath::kMmaF16:
    case CudaMath::kMmaBf16:
      return {16, 16, 4, "unsigned short"};
    case CudaMath::kMmaTf32:
      return {16, 8, 4, "float"};
    default:
      return {8, 4, 2, "double"};
  }
}

/// One operand's shared tile as the generator writes it.
struct OperandTile {
  CudaOperandTile order;
  char name;            // 'a' or 'b'
  std::string offset;   // the gather call for element (mn, k): "tag_a_offset(group, mn, k)"
  std::string bound;    // the operand's M or N extent constant: kM or kN
  std::string origin;   // the CTA's first m or n: tile_m or tile_n
  int extent;           // tile_m or tile_n
  int row;              // elements per shared row
  int stage_elements;   // elements per pipeline stage

  /// The shared index of element (mn, k) within a stage starting at `base`.
  std::string at(std::string_view base, std::string_view mn, std::string_view k) const {
    return order.k_contiguous ? fmt::format("{} + ({}) * {} + {}", base, mn, row, k)
                              : fmt::format("{} + ({}) * {} + {}", base, k, row, mn);
  }
};

OperandTile operand_tile(const CudaPlan& plan, const GemmSpec& s, bool a) {
  OperandTile t;
  t.order = a ? plan.operand_a : plan.operand_b;
  t.name = a ? 'a' : 'b';
  t.offset = a ? fmt::format("{}_a_offset(group, mn, k)", s.tag)
               : fmt::format("{}_b_offset(group, k, mn)", s.tag);
  t.bound = a ? "kM" : "kN";
  t.origin = a ? "tile_m" : "tile_n";
  t.extent = a ? plan.tile_m : plan.tile_n;
  t.row = plan.shared_row(a);
  t.stage_elements = plan.shared_stage_elements(a);
  return t;
}

/// The copies of one operand's k0 slice into `stage`: 16-byte runs where the plan has them
/// and the tensor is aligned, else element by element (cp.async of 4 or 8 bytes, or a load
/// and a shared store for 16-bit elements, which cp.async cannot move alone).
void emit_operand_copy(CodeWriter& out, const OperandTile& t, int tk, int threads, int bytes) {
  const char n = t.name;
  const std::string dst_base = fmt::format("stage * {}", t.stage_elements);
  // Threads walk the contiguous dimension fastest (consecutive addresses per warp), `run`
  // elements at a time; `rolled` keeps a rare path's loop rolled (little code, little NVRTC
  // time).
  auto copy_loop = [&](int run, bool rolled) {
    const bool k_fastest = t.order.k_contiguous;
    const int along = (k_fastest ? tk : t.extent) / run;
    const int total = tk * t.extent / run;
    if (rolled) out.line("CJ_NO_UNROLL");
    out.open("for (int e = tid; e < {}; e += {})", total, threads);
    const std::string fastest =
        run > 1 ? fmt::format("(e % {}) * {}", along, run) : fmt::format("e % {}", along);
    if (k_fastest) {
      out.line("const int kk = {}, mm = e / {};", fastest, along);
    } else {
      out.line("const int mm = {}, kk = e / {};", fastest, along);
    }
    out.line("const cj_index mn = {} + mm, k = k0 + kk;", t.origin);
    out.line("const cj_index offset = mn < {} && k < k_end ? {} : -1;", t.bound, t.offset);
    const std::string dst = t.at(dst_base, "mm", "kk");
    if (run > 1) {
      out.line("cj_cp_async_16(&{}_tile[{}], {}_src + (offset >= 0 ? offset : 0), offset >= 0 ? "
               "16 : 0);",
               n, dst, n);
    } else if (bytes == 2) {
      out.line("CJ_STS({}_tile, {}, offset >= 0 ? CJ_LDG({}_src, offset).bits : (unsigned "
               "short)0);",
               n, dst, n);
    } else {
      out.line("cj_cp_async_{}(&{}_tile[{}], {}_src + (offset >= 0 ? offset : 0), offset >= 0 ? "
               "{} : 0);",
               bytes, n, dst, n, bytes);
    }
    out.close();
  };
  if (t.order.vector) {
    out.open("if ({}_runs)", n);
    copy_loop(16 / bytes, false);
    out.close();
    out.open("else");  // a misaligned view: the rare path
    copy_loop(1, true);
    out.close();
  } else {
    copy_loop(1, false);
  }
}

void emit_stage_loader(CodeWriter& out, const OperandTile& a, const OperandTile& b, int tk,
                       int threads, int bytes) {
  out.line("// Copies the k0 slice of both operands into `stage` (one cp.async group).");
  out.open("auto load_stage = [&](int stage, cj_index k0)");
  emit_operand_copy(out, a, tk, threads, bytes);
  emit_operand_copy(out, b, tk, threads, bytes);
  out.close("};");
}

/// The fragments of k step `ks` of the current stage and their mma.sync.
void emit_fragments_and_mma(CodeWriter& out, const CudaPlan& plan, const OperandTile& a,
                            const OperandTile& b, int fm_count, int fn_count) {
  switch (plan.math) {
    case CudaMath::kMmaF16:
    case CudaMath::kMmaBf16: {
      // ldmatrix: lane l gives the row address of matrix l / 8. A's four 8x8 matrices are
      // (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15); B's two are
      // (n 0-7, k 0-7), (n 0-7, k 8-15). Rows of k are the matrices' rows; rows of m/n are
      // their columns, read with .trans.
      out.line("unsigned a_frag[{}][4], b_frag[{}][2];", fm_count, fn_count);
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      if (a.order.k_contiguous) {
        out.line("  cj_ldmatrix_x4(a_frag[i], &a_tile[{}]);",
                 a.at("a_base", "warp_m + i * 16 + lane % 16", "ks + (lane / 16) * 8"));
      } else {
        out.line("  cj_ldmatrix_x4_trans(a_frag[i], &a_tile[{}]);",
                 a.at("a_base", "warp_m + i * 16 + ((lane / 8) % 2) * 8",
                      "ks + lane % 8 + (lane / 16) * 8"));
      }
      out.line("CJ_UNROLL");
      out.line("for (int j = 0; j < {}; ++j)", fn_count);
      if (b.order.k_contiguous) {
        out.line("  cj_ldmatrix_x2(b_frag[j], &b_tile[{}]);",
                 b.at("b_base", "warp_n + j * 8 + lane % 8", "ks + ((lane / 8) % 2) * 8"));
      } else {
        out.line("  cj_ldmatrix_x2_trans(b_frag[j], &b_tile[{}]);",
                 b.at("b_base", "warp_n + j * 8", "ks + lane % 8 + ((lane / 8) % 2) * 8"));
      }
      const char* mma =
          plan.math == CudaMath::kMmaF16 ? "cj_mma_m16n8k16_f16" : "cj_mma_m16n8k16_bf16";
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  CJ_UNROLL");
      out.line("  for (int j = 0; j < {}; ++j) {}(acc[i][j], a_frag[i], b_frag[j]);", fn_count, mma);
      break;
    }
    case CudaMath::kMmaTf32: {
      // m16n8k8 fragments (PTX ISA): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
      // b0 (k t, n g), b1 (k t + 4, n g); g = lane / 4, t = lane % 4.
      out.line("unsigned a_frag[{}][4], b_frag[{}][2];", fm_count, fn_count);
      out.line("CJ_UNROLL");
      out.open("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("const int m = warp_m + i * 16 + lane / 4, k = ks + lane % 4;");
      out.line("a_frag[i][0] = cj_f32_to_tf32(CJ_LDS(a_tile, {}));", a.at("a_base", "m", "k"));
      out.line("a_frag[i][1] = cj_f32_to_tf32(CJ_LDS(a_tile, {}));", a.at("a_base", "m + 8", "k"));
      out.line("a_frag[i][2] = cj_f32_to_tf32(CJ_LDS(a_tile, {}));", a.at("a_base", "m", "k + 4"));
      out.line("a_frag[i][3] = cj_f32_to_tf32(CJ_LDS(a_tile, {}));",
               a.at("a_base", "m + 8", "k + 4"));
      out.close();
      out.line("CJ_UNROLL");
      out.open("for (int j = 0; j < {}; ++j)", fn_count);
      out.line("const int n = warp_n + j * 8 + lane / 4, k = ks + lane % 4;");
      out.line("b_frag[j][0] = cj_f32_to_tf32(CJ_LDS(b_tile, {}));", b.at("b_base", "n", "k"));
      out.line("b_frag[j][1] = cj_f32_to_tf32(CJ_LDS(b_tile, {}));", b.at("b_base", "n", "k + 4"));
      out.close();
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  CJ_UNROLL");
      out.line(
          "  for (int j = 0; j < {}; ++j) cj_mma_m16n8k8_tf32(acc[i][j], a_frag[i], b_frag[j]);",
          fn_count);
      break;
    }
    default: {
      // m8n8k4 f64: a (m lane / 4, k lane % 4), b (k lane % 4, n lane / 4).
      out.line("double a_frag[{}], b_frag[{}];", fm_count, fn_count);
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  a_frag[i] = CJ_LDS(a_tile, {});",
               a.at("a_base", "warp_m + i * 8 + lane / 4", "ks + lane % 4"));
      out.line("CJ_UNROLL");
      out.line("for (int j = 0; j < {}; ++j)", fn_count);
      out.line("  b_frag[j] = CJ_LDS(b_tile, {});",
               b.at("b_base", "warp_n + j * 8 + lane / 4", "ks + lane % 4"));
      out.line("CJ_UNROLL");
      out.line("for (int i = 0; i < {}; ++i)", fm_count);
      out.line("  CJ_UNROLL");
      out.line("  for (int j = 0; j < {}; ++j) cj_mma_m8n8k4_f64(acc[i][j], a_frag[i], b_frag[j]);",
               fn_count);
      break;
    }
  }
}

}  // namespace

void emit_mma_gemm_kernel(CodeWriter& out, const CudaPlan& plan, const GemmSpec& s,
                          CudaLaunch* launch, GemmCtaForm* form) {
  const MmaShape shape = mma_shape(plan.math);
  const int tm = plan.tile_m, tn = plan.tile_n, tk = plan.tile_k;
  const int threads = plan.threads;
  const int wtm = tm / plan.warps_m, wtn = tn / plan.warps_n;
  const int fm_count = wtm / shape.frag_m, fn_count = wtn / 8;
  const int stages = plan.stages;
  const int bytes = dtype_size(plan.problem.dtype);
  const OperandTile a = operand_tile(plan, s, true), b = operand_tile(plan, s, false);
  const std::int64_t tiles_n = ceil_div(s.n, tn);
  launch->symbol = s.symbol;
  launch->block = {static_cast<std::uint32_t>(threads), 1, 1};
  launch->grid = {static_cast<std::uint32_t>(ceil_div(s.m, tm)),
                  static_cast<std::uint32_t>(tiles_n * plan.problem.groups),
                  static_cast<std::uint32_t>(s.split_k)};
  launch->shared_bytes = plan.shared_bytes();

  emit_gemm_offsets(out, s);
  out.line("// CTA tile {}x{}x{} on {}x{} warps, each {} x {} fragments of {}x8x{}; {}-stage "
           "cp.async pipeline.",
           tm, tn, tk, plan.warps_m, plan.warps_n, fm_count, fn_count, shape.frag_m, shape.frag_k,
           stages);
  form->shared_type = shape.smem_type;
  form->a_elements = stages * a.stage_elements;
  form->b_elements = stages * b.stage_elements;
  if (form->cta_function) {
    out.open("CJ_DEVICE void {}_cta(const cj_args& args, cj_index block_m, {}* a_tile, {}* "
             "b_tile)",
             s.symbol, shape.smem_type, shape.smem_type);
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
  for (const OperandTile* t : {&a, &b}) {
    if (!t->order.vector) continue;
    out.line("// 16-byte runs of {} need a 16-byte aligned tensor (a view may start anywhere).",
             t->name);
    out.line("const bool {0}_runs = reinterpret_cast<unsigned long long>({0}_src) % 16 == 0;",
             t->name);
  }
  out.line("constexpr cj_index kM = {}, kN = {}, kK = {}, kKPerSplit = {};", s.m, s.n, s.k,
           s.k_per_split);
  for (const OperandTile* t : {&a, &b}) {
    const char* mn = t->name == 'a' ? "m" : "n";
    const std::string layout = fmt::format("[stage][{}][{}], rows of {}",
                                           t->order.k_contiguous ? mn : "k",
                                           t->order.k_contiguous ? "k" : mn, t->row);
    if (form->cta_function) {
      out.line("// {}_tile: {}", t->name, layout);
    } else {
      out.line("CJ_SHARED({}, {}_tile, {});  // {}", shape.smem_type, t->name,
               stages * t->stage_elements, layout);
    }
  }
  out.line("const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;");
  out.line("const int warp_m = (warp % {}) * {}, warp_n = (warp / {}) * {};", plan.warps_m, wtm,
           plan.warps_m, wtn);
  out.line("const cj_index group = blockIdx.y / {};", tiles_n);
  out.line("const cj_index tile_m = cj_index({}) * {};",
           form->cta_function ? "block_m" : "blockIdx.x", tm);
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

  emit_stage_loader(out, a, b, tk, threads, bytes);
  out.line("const cj_index k_tiles = (k_end - k_begin + {}) / {};", tk - 1, tk);
  // One loop both fills the pipeline and drains it, so load_stage is inlined once (half the
  // code NVRTC compiles): iteration t copies slice t and multiplies slice t - (stages - 1).
  out.open("for (cj_index t = 0; t < k_tiles + {}; ++t)", stages - 1);
  out.line("if (t < k_tiles) load_stage(int(t % {}), k_begin + t * {});", stages, tk);
  out.line("cj_cp_async_commit();");
  if (stages > 1) out.line("if (t < {}) continue;", stages - 1);
  out.line("const cj_index slice = t - {};", stages - 1);
  out.line("cj_cp_async_wait<{}>();  // the slice has landed", stages - 1);
  out.line("__syncthreads();");
  out.line("const int a_base = int(slice % {}) * {}, b_base = int(slice % {}) * {};", stages,
           a.stage_elements, stages, b.stage_elements);
  out.line("CJ_UNROLL");
  out.open("for (int ks = 0; ks < {}; ks += {})", tk, shape.frag_k);
  emit_fragments_and_mma(out, plan, a, b, fm_count, fn_count);
  out.close();
  out.line("__syncthreads();  // the stage is free for the next copy");
  out.close();
  out.line("cj_cp_async_wait<0>();");

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
