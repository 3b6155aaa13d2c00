// Channels-last backprop data (NCHW). In NCHW the input gradient's tiles can only take vectors
// along W, with rows over a few input channels: each tile then walks a dy window of every
// output channel, which outgrows L1, and the kernels ran at about a third of the NHWC speed.
// With enough channels to fill vectors, the whole NHWC schedule (packed and channel-blocked
// filter, register tiles over pixels x input channels) is faster even counting two copies:
//
//   dyc[n][oh][ow][oc] = dy            (once per call, before the tiles)
//   NHWC tiles write dxc[n][ih][iw][ic]
//   dx = dxc                           (once per call, after them)
//
// (Not for a 1x1 filter at stride 1, whose W-vector tiles need no such window: see below.)
// The nest is rebuilt from the NHWC lowering of the same problem, with its X and Y buffers
// turned into those scratches; the passes after this one see an NHWC problem. The scratches
// are as large as the activations, which is what the NCHW layout costs here (TensorFlow's own
// CPU kernels convert NCHW to NHWC the same way).
#include <tuple>

#include "ir/lower.hpp"
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest channels_last_backprop_data(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.channels_last_copies || p.format != DataFormat::kNCHW) return nest;
  ConvProblem channels_last = p;
  channels_last.format = DataFormat::kNHWC;
  LoopNest out = lower(channels_last);
  const int xc = out.buffer_of_kind(BufferKind::kX);
  const int yc = out.buffer_of_kind(BufferKind::kY);
  for (const auto& [b, name, role] : {std::tuple{xc, "dxc", BufferRole::kOutputCopy},
                                       std::tuple{yc, "dyc", BufferRole::kOutBackpropCopy}}) {
    Buffer& buf = out.buffers[static_cast<std::size_t>(b)];
    buf.name = name;
    buf.kind = BufferKind::kScratch;
    buf.role = role;
  }
  // The caller's NCHW tensors, as the NCHW lowering described them.
  const int x = out.add_buffer(nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(BufferKind::kX))]);
  const int y = out.add_buffer(nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(BufferKind::kY))]);

  // Innermost loops along each destination's contiguous dim: o for dyc, W for dx.
  Stmt to_channels_last = copy_nest(out, {p.n, p.oh, p.ow, p.oc}, {"cn", "coh", "cow", "co"},
                                    yc, y, [](const std::vector<Affine>& v) {
                                      return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]};
                                    });
  Stmt to_channels_first = copy_nest(out, {p.n, p.ih, p.ic, p.iw}, {"fn", "fih", "fi", "fiw"},
                                     x, xc, [](const std::vector<Affine>& v) {
                                       return std::vector<IndexExpr>{v[0], v[1], v[3], v[2]};
                                     });
  out.body.insert(out.body.begin(), std::move(to_channels_last));
  out.body.push_back(std::move(to_channels_first));
  return out;
}

}  // namespace convjit::cpu
