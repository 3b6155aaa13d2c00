// Channels-last copies (NCHW forward, backprop data, depthwise backprop filter). In NCHW the
// tiles of these ops can only
// take vectors along W, with rows over a few channels: each tile then walks a window of every
// channel of the operand it reduces over, which outgrows L1, and the kernels ran at a third
// (input gradient) to a sixth (forward) of the NHWC speed. With enough channels to fill
// vectors, the whole NHWC schedule (register tiles over pixels x channel vectors, packed and
// channel-blocked filter) is faster even counting two copies:
//
//   forward                             backprop data
//   xc[n][ih][iw][ic] = x               dyc[n][oh][ow][oc] = dy     (before the tiles)
//   NHWC tiles write yc[n][oh][ow][oc]  NHWC tiles write dxc[n][ih][iw][ic]
//   y = yc                              dx = dxc                    (after them)
//
// (Not for an input gradient's 1x1 filter at stride 1, whose W-vector tiles need no such
// window, nor for too few channels to fill a vector: see wants_channels_last_copies.)
// The depthwise filter gradient reads both activations and writes dW (HWIO in both layouts):
// xc and dyc are copied in, in the accumulator type (a 16-bit element is then widened once,
// not at each of the kh*kw taps that read it), and nothing is copied out. Its NCHW tiles were
// single elements (each channel's plane reduced by scalar FMAs); NHWC's are channel vectors.
// The nest is rebuilt from the NHWC lowering of the same problem, with its X and Y buffers
// turned into those scratches; the passes after this one see an NHWC problem. The scratches
// are as large as the activations until privatize_batch_copies (the filter gradient:
// privatize_filter_gradient_copy, in parallelize) gives each thread one image's slot
// (TensorFlow's own CPU kernels convert NCHW to NHWC the same way).
#include <string>
#include <tuple>
#include <vector>

#include "ir/lower.hpp"
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest channels_last_copies(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.channels_last_copies || p.format != DataFormat::kNCHW) return nest;
  const bool forward = p.direction == ConvDirection::kForward;
  ConvProblem channels_last = p;
  channels_last.format = DataFormat::kNHWC;
  LoopNest out = lower(channels_last);
  const int xc = out.buffer_of_kind(BufferKind::kX);
  const int yc = out.buffer_of_kind(BufferKind::kY);
  // The caller's NCHW tensors, as the NCHW lowering described them.
  auto caller_tensor = [&](BufferKind kind) {
    return nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(kind))];
  };
  if (p.direction == ConvDirection::kBackpropFilter) {
    const DType wide = accumulator_dtype(p.dtype);
    const std::vector<std::string> x_names{"xn", "xih", "xiw", "xi"};
    const std::vector<std::string> y_names{"yn", "yoh", "yow", "yo"};
    std::vector<Stmt> copies;
    for (const auto& [copy, kind, name, role, names] :
         {std::tuple{xc, BufferKind::kX, "xc", BufferRole::kInputCopy, &x_names},
          std::tuple{yc, BufferKind::kY, "dyc", BufferRole::kOutBackpropCopy, &y_names}}) {
      Buffer& b = out.buffers[static_cast<std::size_t>(copy)];
      b.name = name;
      b.role = role;
      b.kind = BufferKind::kScratch;
      b.dtype = wide;
      const std::vector<std::int64_t> extents = b.dims;  // [n][h][w][c]
      const int caller = out.add_buffer(caller_tensor(kind));
      copies.push_back(copy_nest(out, extents, *names, copy, caller,
                                 [](const std::vector<Affine>& v) {
                                   return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]};
                                 }));
    }
    out.body.insert(out.body.begin(), std::make_move_iterator(copies.begin()),
                    std::make_move_iterator(copies.end()));
    return out;
  }
  // The operand the tiles read is copied in, the one they write copied out.
  const int read_copy = forward ? xc : yc;
  const int written_copy = forward ? yc : xc;
  auto& read_buffer = out.buffers[static_cast<std::size_t>(read_copy)];
  auto& written_buffer = out.buffers[static_cast<std::size_t>(written_copy)];
  read_buffer.name = forward ? "xc" : "dyc";
  read_buffer.role = forward ? BufferRole::kInputCopy : BufferRole::kOutBackpropCopy;
  written_buffer.name = forward ? "yc" : "dxc";
  written_buffer.role = BufferRole::kOutputCopy;
  read_buffer.kind = written_buffer.kind = BufferKind::kScratch;
  const int x = out.add_buffer(caller_tensor(BufferKind::kX));
  const int y = out.add_buffer(caller_tensor(BufferKind::kY));
  const int read = forward ? x : y;
  const int written = forward ? y : x;
  // [n][h][w][c] extents of the operand read and of the one written.
  const std::int64_t read_h = forward ? p.ih : p.oh, read_w = forward ? p.iw : p.ow,
                     read_c = forward ? p.ic : p.oc;
  const std::int64_t written_h = forward ? p.oh : p.ih, written_w = forward ? p.ow : p.iw,
                     written_c = forward ? p.oc : p.ic;

  // Innermost loops along each destination's contiguous dim: C for the copy in, W for the copy
  // out. Indices are in [n][h][w][c] order whatever the buffer's layout.
  const std::vector<std::string> in_names =
      forward ? std::vector<std::string>{"cn", "cih", "ciw", "ci"}
              : std::vector<std::string>{"cn", "coh", "cow", "co"};
  const std::vector<std::string> out_names =
      forward ? std::vector<std::string>{"fn", "foh", "fo", "fow"}
              : std::vector<std::string>{"fn", "fih", "fi", "fiw"};
  Stmt to_channels_last = copy_nest(out, {p.n, read_h, read_w, read_c}, in_names, read_copy,
                                    read, [](const std::vector<Affine>& v) {
                                      return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]};
                                    });
  Stmt to_channels_first = copy_nest(out, {p.n, written_h, written_c, written_w}, out_names,
                                     written, written_copy,
                                     [](const std::vector<Affine>& v) {
                                       return std::vector<IndexExpr>{v[0], v[1], v[3], v[2]};
                                     });
  out.body.insert(out.body.begin(), std::move(to_channels_last));
  out.body.push_back(std::move(to_channels_first));
  return out;
}

}  // namespace convjit::cpu
