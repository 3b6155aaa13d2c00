// The CUDA plan model: which algorithm, tile and split for a problem on a device. Every choice
// the generated code depends on is made here (and can be forced through PlanOptions::forced so
// tests execute every code path on small shapes).
#include "codegen/cuda/cuda_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "codegen/cuda/cuda_gemm_shape.hpp"

namespace convjit::codegen {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Smallest power of two >= v within [lo, hi].
int pow2_at_least(std::int64_t v, int lo, int hi) {
  int p = lo;
  while (p < hi && p < v) p *= 2;
  return p;
}

/// The forced choices, parsed: "key=value" pairs separated by commas.
struct Forced {
  std::map<std::string, std::string> values;
  bool has(const std::string& key) const { return values.count(key) != 0; }
  const std::string& get(const std::string& key) const { return values.at(key); }
};

constexpr std::string_view kForcedKeys[] = {"algo",    "tile",   "micro",  "warps",
                                            "splitk",  "stages", "threads", "cblock",
                                            "pblock",  "mblock", "fuse"};

Expected<Forced> parse_forced(std::string_view text) {
  Forced forced;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return invalid_argument(fmt::format("forced CUDA plan: '{}' is not key=value", item));
    }
    const std::string key(item.substr(0, eq));
    if (std::find(std::begin(kForcedKeys), std::end(kForcedKeys), key) == std::end(kForcedKeys)) {
      return invalid_argument(fmt::format("forced CUDA plan: unknown key '{}'; known keys: {}", key,
                                          fmt::join(kForcedKeys, ", ")));
    }
    forced.values[key] = std::string(item.substr(eq + 1));
  }
  return forced;
}

Expected<int> parse_int(const std::string& key, std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) {
    return invalid_argument(
        fmt::format("forced CUDA plan: {}={} is not a positive integer", key, text));
  }
  return value;
}

/// "64x32x8" into its numbers; `count` of them.
Expected<std::vector<int>> parse_dims(const std::string& key, std::string_view text, int count) {
  std::vector<int> dims;
  while (true) {
    const std::size_t x = text.find('x');
    Expected<int> v = parse_int(key, text.substr(0, x));
    if (!v) return v.status();
    dims.push_back(*v);
    if (x == std::string_view::npos) break;
    text = text.substr(x + 1);
  }
  if (static_cast<int>(dims.size()) != count) {
    return invalid_argument(
        fmt::format("forced CUDA plan: {} needs {} numbers separated by 'x'", key, count));
  }
  return dims;
}

/// Whether this problem is a depthwise-style grouped convolution (one input channel per
/// group), for which GEMM tiles would be mostly empty.
bool depthwise_like(const ConvProblem& p) { return p.filter_in == 1 && p.groups > 1; }

bool tensor_cores_for(const ConvProblem& p, const CudaDeviceInfo& d, MathMode math) {
  if (!d.has_sm80_mma()) return false;
  switch (p.dtype) {
    case DType::kHalf:
    case DType::kBFloat16:
      return true;
    case DType::kFloat32:
      return math == MathMode::kTF32;
    // DMMA is fast on the data-center parts only (sm_80, sm_90, sm_100).
    case DType::kFloat64:
      return d.arch == 80 || d.arch == 90 || d.arch == 100;
  }
  return false;
}

CudaMath mma_math(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return CudaMath::kMmaF16;
    case DType::kBFloat16:
      return CudaMath::kMmaBf16;
    case DType::kFloat32:
      return CudaMath::kMmaTf32;
    case DType::kFloat64:
      return CudaMath::kMmaF64;
  }
  return CudaMath::kFfma;
}

/// The model's FFMA tile: N rounded to a power of two (8..64), 16 rows of threads.
void choose_ffma_tile(const GemmShape& g, CudaPlan* plan) {
  plan->tile_n = pow2_at_least(g.n, 8, 64);
  plan->tile_m = plan->tile_n <= 16 ? 128 : 64;
  if (g.m <= 32) plan->tile_m = 32;
  plan->tile_k = 8;
  plan->micro_m = plan->tile_m / 16;
  plan->micro_n = std::max(1, plan->tile_n / 16);
  // Two shared stages: the next slice's global loads are in flight while this one is
  // multiplied (2 x 8 x (64 + 64) floats: 8 KiB). Fewer where the reduction has one slice.
  plan->stages = 2;
}

/// The model's tensor-core tile: 2x2 warps on 64x64, narrower for small N.
void choose_mma_tile(const GemmShape& g, CudaPlan* plan) {
  const bool f64 = plan->math == CudaMath::kMmaF64;
  plan->tile_n = pow2_at_least(g.n, 8, 64);
  plan->tile_m = 64;
  if (plan->tile_n >= 32) {
    plan->warps_m = 2;
    plan->warps_n = 2;
  } else {
    plan->warps_m = f64 ? 2 : 4;
    plan->warps_n = 1;
  }
  if (f64 && plan->tile_n == 64) plan->tile_m = 32;
  switch (plan->math) {
    case CudaMath::kMmaF16:
    case CudaMath::kMmaBf16:
      plan->tile_k = 32;
      break;
    case CudaMath::kMmaTf32:
      plan->tile_k = 16;
      break;
    default:
      plan->tile_k = 8;
      break;
  }
  // cp.async stages: three for the 16-bit kernels, whose tiles are small (a 64x64x32 stage is
  // 10 KiB), so that two copies are in flight while one is multiplied; two for tf32 and f64,
  // whose fragments come from shared memory element by element and hide less behind a copy.
  // Never more stages than the reduction has k tiles (checked once split-K is known).
  plan->stages = (plan->math == CudaMath::kMmaF16 || plan->math == CudaMath::kMmaBf16) ? 3 : 2;
}

/// How each GEMM operand reaches shared memory (CudaOperandTile; the FFMA kernel uses only
/// which dimension is contiguous): x and y are NHWC or NCHW, w is always HWIO. In NHWC the
/// channels have unit stride; they run along K for the forward x and the input gradient's dy
/// and w, along M or N for the filter gradient's x and dy and the forward w. In NCHW, x's and
/// y's unit stride is the column, along M (forward x, input-gradient dy) or K (filter
/// gradient); columns are gathered element by element, as padding and stride decide each
/// one's validity. Runs of 16 bytes are whole when the group's
/// channels are a multiple of them.
void choose_operand_tiles(CudaPlan* plan) {
  const ConvProblem& p = plan->problem;
  const bool nhwc = p.format == DataFormat::kNHWC;
  const int run = 16 / dtype_size(p.dtype);
  const bool in_runs = p.filter_in % run == 0;
  const bool out_runs = p.oc_per_group() % run == 0;
  switch (p.direction) {
    case ConvDirection::kForward:
      plan->operand_a = {nhwc, nhwc && in_runs};
      plan->operand_b = {false, out_runs};
      break;
    case ConvDirection::kBackpropData:
      plan->operand_a = {nhwc, nhwc && out_runs};
      plan->operand_b = {true, out_runs};
      break;
    case ConvDirection::kBackpropFilter:
      plan->operand_a = {!nhwc, nhwc && in_runs};
      plan->operand_b = {!nhwc, nhwc && out_runs};
      break;
  }
}

/// Split-K for filter gradients: enough CTAs to fill the device twice, each slice at least 512
/// reduction steps long, at most 16 slices.
int choose_split(std::int64_t blocks, std::int64_t k, int sm_count) {
  if (blocks >= sm_count || k < 2048) return 1;
  const std::int64_t want = ceil_div(2 * sm_count, blocks);
  return static_cast<int>(std::clamp<std::int64_t>(std::min(want, k / 512), 1, 16));
}

/// The split actually realised for `k` steps in `requested` slices: slices of ceil(k / n) steps,
/// so the last ones may vanish (k = 10 in 6 slices is 5 slices of 2).
int realised_split(std::int64_t k, int requested) {
  if (k <= 0) return 1;
  const std::int64_t per = ceil_div(k, requested);
  return static_cast<int>(ceil_div(k, per));
}

Status check_threads(int threads, const CudaDeviceInfo& d) {
  if (threads < 32 || threads > 512 || threads % 32 != 0) {
    return invalid_argument(fmt::format(
        "CUDA plan: {} threads per block; convjit's kernels use a multiple of 32 from 32 to "
        "512 (two blocks must fit an SM)",
        threads));
  }
  (void)d;
  return Status::ok();
}

Status check_gemm_tile(const CudaPlan& p) {
  if (p.algorithm == CudaAlgorithm::kImplicitGemm) {
    if (p.tile_m % p.micro_m != 0 || p.tile_n % p.micro_n != 0) {
      return invalid_argument(fmt::format("CUDA plan: tile {}x{} is not a multiple of micro {}x{}",
                                          p.tile_m, p.tile_n, p.micro_m, p.micro_n));
    }
    if (p.micro_m * p.micro_n > 64) {
      return invalid_argument("CUDA plan: a register tile over 64 accumulators would spill");
    }
    if (p.stages < 1 || p.stages > 2) {
      return invalid_argument("CUDA plan: the FFMA kernel takes 1 or 2 stages");
    }
  } else {
    const int frag_m = p.math == CudaMath::kMmaF64 ? 8 : 16;
    const int frag_k = p.math == CudaMath::kMmaF64 ? 4 : p.math == CudaMath::kMmaTf32 ? 8 : 16;
    if (p.tile_m % (p.warps_m * frag_m) != 0 || p.tile_n % (p.warps_n * 8) != 0 ||
        p.tile_k % frag_k != 0) {
      return invalid_argument(fmt::format(
          "CUDA plan: tensor-core tile {}x{}x{} does not split into {}x{} warps of {}x8x{} "
          "fragments",
          p.tile_m, p.tile_n, p.tile_k, p.warps_m, p.warps_n, frag_m, frag_k));
    }
    const int accumulators = (p.tile_m / p.warps_m) * (p.tile_n / p.warps_n) / 32;
    if (accumulators > 64) {
      return invalid_argument("CUDA plan: a warp tile over 64 accumulators per lane would spill");
    }
    if (p.stages < 1 || p.stages > 4) {
      return invalid_argument("CUDA plan: stages must be 1 to 4");
    }
    // Tiles of whole fragments hold whole 16-byte runs along every dimension (k steps of 16,
    // 8, 4 and m/n steps of 8 against runs of 8, 4, 2 elements): no check of the runs needed.
  }
  CONVJIT_RETURN_IF_ERROR(check_threads(p.threads, p.device));
  if (p.shared_bytes() > p.device.shared_bytes_per_block) {
    return invalid_argument(
        fmt::format("CUDA plan: the tiles need {} bytes of shared memory, "
                    "over the {} a block may declare",
                    p.shared_bytes(), p.device.shared_bytes_per_block));
  }
  return Status::ok();
}

std::string dtype_tag(const CudaPlan& p) {
  switch (p.problem.dtype) {
    case DType::kHalf:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return p.math == CudaMath::kMmaTf32 ? "f32_tf32" : "f32";
    case DType::kFloat64:
      return "f64";
  }
  return "f32";
}

std::string_view direction_tag(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward:
      return "fwd";
    case ConvDirection::kBackpropData:
      return "bwd_data";
    case ConvDirection::kBackpropFilter:
      return "bwd_filter";
  }
  return "fwd";
}

}  // namespace

std::string_view algorithm_name(CudaAlgorithm algorithm) {
  switch (algorithm) {
    case CudaAlgorithm::kZeroFill:
      return "zero";
    case CudaAlgorithm::kDirect:
      return "direct";
    case CudaAlgorithm::kImplicitGemm:
      return "igemm";
    case CudaAlgorithm::kTensorCore:
      return "mma";
    case CudaAlgorithm::kDepthwise:
      return "dw";
  }
  return "direct";
}

int CudaPlan::shared_bytes() const {
  const int acc = accumulator_bytes();
  switch (algorithm) {
    case CudaAlgorithm::kZeroFill:
    case CudaAlgorithm::kDirect:
      return 0;
    case CudaAlgorithm::kImplicitGemm:
      return stages * (shared_stage_elements(true) + shared_stage_elements(false)) * acc;
    case CudaAlgorithm::kTensorCore:
      return stages * (shared_stage_elements(true) + shared_stage_elements(false)) *
             dtype_size(problem.dtype);
    case CudaAlgorithm::kDepthwise:
      if (problem.direction == ConvDirection::kBackpropData) {
        return static_cast<int>(problem.kh * problem.kw) * channel_block *
               static_cast<int>(problem.oc_per_group()) * acc;
      }
      return pixel_block * channel_block * multiplier_block * acc;
  }
  return 0;
}

// Rows are 16-byte multiples (cp.async and ldmatrix rows), padded so that the rows one
// fragment load reads at once fall in different banks (for tiles of 16 or more along the row;
// 8 wide tiles conflict two ways): 16-bit tiles by 16 bytes (ldmatrix reads 16-byte rows of 8
// rows); tf32 rows of k by 4 words (lanes read word lane % 4 of rows lane / 4: rows 4 or 12
// banks apart) and rows of m or n by 8 (lanes read rows lane % 4 at words lane / 4); f64 by 4
// doubles (a half-warp reads 4 x 4 doubles; rows 4 or 12 double-banks apart).
int CudaPlan::shared_row(bool of_a) const {
  const CudaOperandTile& t = of_a ? operand_a : operand_b;
  const int extent = of_a ? tile_m : tile_n;
  // FFMA slices are rows of m or n for every operand; one copied k-fastest is padded by 4
  // elements, so the eight k rows a warp stores at once start 4 (f32) or 8 (f64) banks apart.
  if (algorithm == CudaAlgorithm::kImplicitGemm) return extent + (t.k_contiguous ? 4 : 0);
  switch (math) {
    case CudaMath::kMmaF16:
    case CudaMath::kMmaBf16:
      return (t.k_contiguous ? tile_k : extent) + 8;
    case CudaMath::kMmaTf32:
      return t.k_contiguous ? tile_k + 4 : extent + 8;
    default:
      return (t.k_contiguous ? tile_k : extent) + 4;
  }
}

int CudaPlan::shared_stage_elements(bool of_a) const {
  const CudaOperandTile& t = of_a ? operand_a : operand_b;
  const int extent = of_a ? tile_m : tile_n;
  if (algorithm == CudaAlgorithm::kImplicitGemm) return tile_k * shared_row(of_a);
  return (t.k_contiguous ? extent : tile_k) * shared_row(of_a);
}

std::size_t CudaPlan::workspace_bytes() const {
  if (split_k <= 1 || problem.direction != ConvDirection::kBackpropFilter) return 0;
  const std::int64_t filter = problem.elements(TensorRole::kW);
  return static_cast<std::size_t>(filter) * static_cast<std::size_t>(split_k) *
         static_cast<std::size_t>(accumulator_bytes());
}

std::string CudaPlan::describe() const {
  std::string text = fmt::format("target={} algo={} math={}", device.arch_name(),
                                 algorithm_name(algorithm), dtype_tag(*this));
  switch (algorithm) {
    case CudaAlgorithm::kZeroFill:
    case CudaAlgorithm::kDirect:
      break;
    case CudaAlgorithm::kImplicitGemm:
      text += fmt::format(" tile={}x{}x{} micro={}x{} stages={} a={}-fastest b={}-fastest",
                          tile_m, tile_n, tile_k, micro_m, micro_n, stages,
                          operand_a.k_contiguous ? 'k' : 'm', operand_b.k_contiguous ? 'k' : 'n');
      break;
    case CudaAlgorithm::kTensorCore:
      text += fmt::format(" tile={}x{}x{} warps={}x{} stages={} a={}{} b={}{}", tile_m, tile_n,
                          tile_k, warps_m, warps_n, stages,
                          operand_a.k_contiguous ? "k-rows" : "m-rows",
                          operand_a.vector ? "/16B" : "", operand_b.k_contiguous ? "k-rows" : "n-rows",
                          operand_b.vector ? "/16B" : "");
      break;
    case CudaAlgorithm::kDepthwise:
      text += fmt::format(" cblock={} pblock={} mblock={}", channel_block, pixel_block,
                          multiplier_block);
      break;
  }
  if (fused_residues) text += " fuse=1";
  text += fmt::format(" threads={} splitk={} smem={} workspace={}", threads, split_k,
                      shared_bytes(), workspace_bytes());
  if (!deterministic) text += " deterministic=0";
  if (!tuning.empty()) text += " " + tuning;
  return text;
}

std::string cuda_kernel_name(const CudaPlan& p) {
  std::string name = fmt::format(
      "cuda_sm{}{}_{}_{}{}_{}_", p.device.arch, p.device.arch_specific ? "a" : "", dtype_tag(p),
      direction_tag(p.problem.direction), p.problem.depthwise ? "_dw" : "",
      p.problem.format == DataFormat::kNCHW ? "nchw" : "nhwc");
  switch (p.algorithm) {
    case CudaAlgorithm::kZeroFill:
      name += "zero_fill";
      break;
    case CudaAlgorithm::kDirect:
      name += fmt::format("direct_t{}", p.threads);
      break;
    case CudaAlgorithm::kImplicitGemm:
      name +=
          fmt::format("igemm_m{}n{}k{}_t{}x{}", p.tile_m, p.tile_n, p.tile_k, p.micro_m, p.micro_n);
      if (p.stages > 1) name += fmt::format("_s{}", p.stages);
      break;
    case CudaAlgorithm::kTensorCore:
      name +=
          fmt::format("mma_m{}n{}k{}_w{}x{}", p.tile_m, p.tile_n, p.tile_k, p.warps_m, p.warps_n);
      if (p.stages > 1) name += fmt::format("_s{}", p.stages);
      // Each operand's shared tile: rows of k or of m/n, 16-byte (v) or element (e) copies.
      name += fmt::format("_a{}{}b{}{}", p.operand_a.k_contiguous ? 'k' : 'm',
                          p.operand_a.vector ? 'v' : 'e', p.operand_b.k_contiguous ? 'k' : 'n',
                          p.operand_b.vector ? 'v' : 'e');
      break;
    case CudaAlgorithm::kDepthwise:
      if (p.problem.direction == ConvDirection::kBackpropData) {
        name += fmt::format("dw_c{}p{}", p.channel_block, p.pixel_block);
      } else {
        name += fmt::format("dw_c{}r{}m{}", p.channel_block, p.pixel_block, p.multiplier_block);
      }
      break;
  }
  if (p.problem.direction == ConvDirection::kBackpropData &&
      (p.algorithm == CudaAlgorithm::kImplicitGemm || p.algorithm == CudaAlgorithm::kTensorCore) &&
      (p.problem.stride_h > 1 || p.problem.stride_w > 1)) {
    name += fmt::format("_r{}x{}{}", p.problem.stride_h, p.problem.stride_w,
                        p.fused_residues ? "f" : "");
  }
  if (p.split_k > 1) name += fmt::format("_sk{}", p.split_k);
  return name;
}

namespace {

constexpr std::int64_t kMaxGridYZ = 65535;
constexpr std::int64_t kMaxGridX = 2147483647;

/// The plan with `forced`'s choices (none: the model's).
Expected<std::unique_ptr<CudaPlan>> make_plan(const ConvProblem& problem,
                                              const CudaDeviceInfo& device,
                                              const PlanOptions& options, const Forced& forced) {
  auto plan = std::make_unique<CudaPlan>();
  CudaPlan& p = *plan;
  p.problem = problem;
  p.device = device;
  p.math_mode = options.math_mode;
  p.deterministic = options.deterministic;

  // The algorithm.
  if (problem.is_empty()) {
    p.algorithm = CudaAlgorithm::kZeroFill;
    if (forced.has("algo") && forced.get("algo") != "zero") {
      return invalid_argument(
          "CUDA plan: a problem with an empty operand is a zero fill; "
          "algo=" +
          forced.get("algo") + " cannot apply");
    }
  } else if (forced.has("algo")) {
    const std::string& a = forced.get("algo");
    if (a == "direct") {
      p.algorithm = CudaAlgorithm::kDirect;
    } else if (a == "igemm") {
      p.algorithm = CudaAlgorithm::kImplicitGemm;
    } else if (a == "mma") {
      p.algorithm = CudaAlgorithm::kTensorCore;
      if (!tensor_cores_for(problem, device, options.math_mode) &&
          !(problem.dtype == DType::kFloat64 && device.has_sm80_mma())) {
        return invalid_argument(fmt::format(
            "CUDA plan: algo=mma needs sm_80 or later and f16, bf16, f64 or f32 with TF32 math "
            "(got {} on {}{})",
            dtype_name(problem.dtype), device.arch_name(),
            problem.dtype == DType::kFloat32 ? ", exact f32 math" : ""));
      }
    } else if (a == "dw") {
      if (problem.direction == ConvDirection::kForward || problem.filter_in != 1) {
        return invalid_argument(
            "CUDA plan: algo=dw computes depthwise gradients (one input "
            "channel per group) only");
      }
      p.algorithm = CudaAlgorithm::kDepthwise;
    } else {
      return invalid_argument("CUDA plan: algo must be direct, igemm, mma or dw, not '" + a + "'");
    }
  } else if (depthwise_like(problem)) {
    p.algorithm = problem.direction == ConvDirection::kForward ? CudaAlgorithm::kDirect
                                                               : CudaAlgorithm::kDepthwise;
  } else {
    p.algorithm = tensor_cores_for(problem, device, options.math_mode)
                      ? CudaAlgorithm::kTensorCore
                      : CudaAlgorithm::kImplicitGemm;
  }
  if (p.algorithm == CudaAlgorithm::kTensorCore) p.math = mma_math(problem.dtype);

  auto forced_int = [&](const std::string& key, int* out) -> Status {
    if (!forced.has(key)) return Status::ok();
    Expected<int> v = parse_int(key, forced.get(key));
    if (!v) return v.status();
    *out = *v;
    return Status::ok();
  };

  const GemmShape shape = gemm_shape(problem);
  switch (p.algorithm) {
    case CudaAlgorithm::kZeroFill:
    case CudaAlgorithm::kDirect:
      p.threads = 256;
      CONVJIT_RETURN_IF_ERROR(forced_int("threads", &p.threads));
      CONVJIT_RETURN_IF_ERROR(check_threads(p.threads, device));
      break;
    case CudaAlgorithm::kImplicitGemm:
    case CudaAlgorithm::kTensorCore: {
      const bool mma = p.algorithm == CudaAlgorithm::kTensorCore;
      if (mma) {
        choose_mma_tile(shape, &p);
      } else {
        choose_ffma_tile(shape, &p);
      }
      if (forced.has("tile")) {
        Expected<std::vector<int>> t = parse_dims("tile", forced.get("tile"), 3);
        if (!t) return t.status();
        p.tile_m = (*t)[0];
        p.tile_n = (*t)[1];
        p.tile_k = (*t)[2];
        if (!mma && !forced.has("micro")) {
          p.micro_m = std::max(1, p.tile_m / 16);
          p.micro_n = std::max(1, p.tile_n / 16);
        }
      }
      if (!mma && forced.has("micro")) {
        Expected<std::vector<int>> t = parse_dims("micro", forced.get("micro"), 2);
        if (!t) return t.status();
        p.micro_m = (*t)[0];
        p.micro_n = (*t)[1];
      }
      if (mma && forced.has("warps")) {
        Expected<std::vector<int>> t = parse_dims("warps", forced.get("warps"), 2);
        if (!t) return t.status();
        p.warps_m = (*t)[0];
        p.warps_n = (*t)[1];
      }
      choose_operand_tiles(&p);  // FFMA: which dimension the slice copies walk fastest
      p.threads = mma ? 32 * p.warps_m * p.warps_n
                      : (p.tile_m / std::max(1, p.micro_m)) * (p.tile_n / std::max(1, p.micro_n));
      CONVJIT_RETURN_IF_ERROR(check_gemm_tile(p));
      if (problem.direction == ConvDirection::kBackpropFilter) {
        const std::int64_t blocks =
            ceil_div(shape.m, p.tile_m) * ceil_div(shape.n, p.tile_n) * problem.groups;
        p.split_k = choose_split(blocks, shape.k, device.sm_count);
        CONVJIT_RETURN_IF_ERROR(forced_int("splitk", &p.split_k));
        p.split_k = realised_split(shape.k, p.split_k);
      }
      // A strided input gradient's residue classes are GEMMs of one N and one CTA tile: one
      // launch runs them all, so the device schedules every class's CTAs together (no gap
      // between launches, no partly filled last wave per class; a 16-class stride-4 stem's
      // small classes would otherwise each underfill the device). Separate launches stay
      // available (fuse=0), and the tuner tries them.
      if (problem.direction == ConvDirection::kBackpropData) {
        const std::vector<ResidueClass> classes = residue_classes(problem);
        std::int64_t blocks = 0;
        for (const ResidueClass& c : classes) blocks += ceil_div(c.m(problem), p.tile_m);
        p.fused_residues = classes.size() > 1 && blocks <= kMaxGridX;
        if (forced.has("fuse")) {
          const std::string& value = forced.get("fuse");
          if (value != "0" && value != "1") {
            return invalid_argument("forced CUDA plan: fuse must be 0 or 1, not '" + value + "'");
          }
          const bool fuse = value == "1";
          if (fuse && blocks > kMaxGridX) {
            return invalid_argument(fmt::format(
                "CUDA plan: fuse=1 needs {} blocks along grid x (at most {})", blocks,
                kMaxGridX));
          }
          p.fused_residues = fuse && classes.size() > 1;
        }
      }
      // One FFMA stage where the residue classes are fused: every class's CTA body is inlined
      // into one kernel, and double-buffered bodies made NVRTC take 2-3x as long on the strided
      // stems (ConvNeXt's 16 classes: 3 s -> 9-10 s) and 40 more registers.
      if (!mma && p.fused_residues) p.stages = 1;
      {
        // The longest reduction one CTA walks (the input gradient's residue classes have
        // fewer taps than the whole filter): more stages than its k tiles only cost memory.
        const std::int64_t k_tiles = ceil_div(ceil_div(shape.k, p.split_k), p.tile_k);
        p.stages = static_cast<int>(std::clamp<std::int64_t>(k_tiles, 1, p.stages));
        CONVJIT_RETURN_IF_ERROR(forced_int("stages", &p.stages));
        CONVJIT_RETURN_IF_ERROR(check_gemm_tile(p));  // the stages' range and shared memory
      }
      break;
    }
    case CudaAlgorithm::kDepthwise: {
      const std::int64_t c = problem.groups;
      const std::int64_t m = problem.oc_per_group();
      p.channel_block = pow2_at_least(c, 1, 32);
      CONVJIT_RETURN_IF_ERROR(forced_int("cblock", &p.channel_block));
      if (problem.direction == ConvDirection::kBackpropData) {
        const int per_channel =
            static_cast<int>(problem.kh * problem.kw * m) * p.accumulator_bytes();
        while (p.channel_block > 1 && per_channel * p.channel_block > device.shared_bytes_per_block)
          p.channel_block /= 2;
        p.pixel_block = std::max(1, 256 / p.channel_block);
        CONVJIT_RETURN_IF_ERROR(forced_int("pblock", &p.pixel_block));
        p.multiplier_block = static_cast<int>(m);
      } else {
        p.multiplier_block = static_cast<int>(std::min<std::int64_t>(m, 8));
        CONVJIT_RETURN_IF_ERROR(forced_int("mblock", &p.multiplier_block));
        p.pixel_block = std::max(1, 256 / p.channel_block);
        CONVJIT_RETURN_IF_ERROR(forced_int("pblock", &p.pixel_block));
        const std::int64_t positions = problem.n * problem.oh * problem.ow;
        const std::int64_t blocks = problem.kh * problem.kw * ceil_div(c, p.channel_block) *
                                    ceil_div(m, p.multiplier_block);
        p.split_k = choose_split(blocks, positions, device.sm_count);
        CONVJIT_RETURN_IF_ERROR(forced_int("splitk", &p.split_k));
        p.split_k = realised_split(positions, p.split_k);
        if (p.multiplier_block > 16) {
          return invalid_argument("CUDA plan: mblock over 16 accumulators per thread would spill");
        }
      }
      p.threads = p.channel_block * p.pixel_block;
      CONVJIT_RETURN_IF_ERROR(check_threads(p.threads, device));
      if (p.shared_bytes() > device.shared_bytes_per_block) {
        return invalid_argument(
            fmt::format("CUDA plan: the depthwise tiles need {} bytes of "
                        "shared memory, over the {} a block may declare",
                        p.shared_bytes(), device.shared_bytes_per_block));
      }
      break;
    }
  }
  for (const auto& [key, value] : forced.values) {
    const bool used =
        key == "algo" ||
        (key == "threads" &&
         (p.algorithm == CudaAlgorithm::kDirect || p.algorithm == CudaAlgorithm::kZeroFill)) ||
        ((key == "tile") && (p.algorithm == CudaAlgorithm::kImplicitGemm ||
                             p.algorithm == CudaAlgorithm::kTensorCore)) ||
        (key == "micro" && p.algorithm == CudaAlgorithm::kImplicitGemm) ||
        (key == "warps" && p.algorithm == CudaAlgorithm::kTensorCore) ||
        (key == "stages" && (p.algorithm == CudaAlgorithm::kImplicitGemm ||
                             p.algorithm == CudaAlgorithm::kTensorCore)) ||
        (key == "fuse" && problem.direction == ConvDirection::kBackpropData &&
         (p.algorithm == CudaAlgorithm::kImplicitGemm ||
          p.algorithm == CudaAlgorithm::kTensorCore)) ||
        (key == "splitk" && problem.direction == ConvDirection::kBackpropFilter &&
         (p.algorithm == CudaAlgorithm::kImplicitGemm ||
          p.algorithm == CudaAlgorithm::kTensorCore || p.algorithm == CudaAlgorithm::kDepthwise)) ||
        ((key == "cblock" || key == "pblock") && p.algorithm == CudaAlgorithm::kDepthwise) ||
        (key == "mblock" && p.algorithm == CudaAlgorithm::kDepthwise &&
         problem.direction == ConvDirection::kBackpropFilter);
    if (!used) {
      return invalid_argument(
          fmt::format("forced CUDA plan: {}={} does not apply to algo={} "
                      "for this op",
                      key, value, algorithm_name(p.algorithm)));
    }
  }
  // Grid limits: the GEMMs put N tiles x groups in y and split-K slices in z; the depthwise
  // wgrad channel chunks x multiplier chunks in y.
  std::int64_t grid_y = 1;
  if (p.algorithm == CudaAlgorithm::kImplicitGemm || p.algorithm == CudaAlgorithm::kTensorCore) {
    grid_y = ceil_div(shape.n, p.tile_n) * problem.groups;
  } else if (p.algorithm == CudaAlgorithm::kDepthwise) {
    grid_y = ceil_div(problem.groups, p.channel_block) *
             (problem.direction == ConvDirection::kBackpropFilter
                  ? ceil_div(problem.oc_per_group(), p.multiplier_block)
                  : 1);
  }
  if (grid_y > kMaxGridYZ || p.split_k > kMaxGridYZ) {
    return invalid_argument(fmt::format("CUDA plan: {} blocks along grid y (at most {}); use "
                                        "algo=direct",
                                        grid_y, kMaxGridYZ));
  }
  p.kernel_name = cuda_kernel_name(p);
  return plan;
}

}  // namespace

Expected<std::unique_ptr<CudaPlan>> make_cuda_plan(const ConvProblem& problem,
                                                   const CudaDeviceInfo& device,
                                                   const PlanOptions& options) {
  Expected<Forced> forced = parse_forced(options.forced);
  if (!forced) return forced.status();
  Expected<std::unique_ptr<CudaPlan>> plan = make_plan(problem, device, options, *forced);
  if (plan || !forced->values.empty()) return plan;
  // The model's choice does not fit this problem (a depthwise filter tile over the shared
  // memory, more groups than a grid dimension holds): the direct kernel takes every problem.
  Forced direct;
  direct.values["algo"] = "direct";
  return make_plan(problem, device, options, direct);
}

}  // namespace convjit::codegen
