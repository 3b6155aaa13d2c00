// The names of CPU kernels: one grammar, printed from the CpuPlan and the schedule that carried
// it out, so logs, dumps and the cache listing say how each kernel was built.
//
//   <backend>_<isa>_<dtype>_<op>_<layout>[_<token>...]
//
// The tokens, in the order the schedule applies them (each present only when it applies):
//
//   from the plan (decisions)                  from the scheduled nest (what the rules made)
//   tonhwc     NCHW through NHWC copies of the zpad      dy copies got zero borders
//              activations (x/y or dy/dx)
//   wvec       W-vector tiles on transposed dy r<R>x<C>  the register tile computing the most
//   dyp, dyp2  NCHW depthwise dy planes (dyp2:           outputs: R rows x C columns; "e" when
//              each column twice, stride 2)              elementwise (depthwise channels)
//   res<H>x<W> stride residues per dim         blk=n,oh<R>  batch outside, chunks of R output
//   pack       packed filter [kh][kw][oc][ic]              rows (blk=n: whole images)
//   cb<W>[r]   channel blocks of W channels    blk=ohx<T>,oh<R>  each of T threads takes rows
//              outside the pixels (r: around               of every tile, R at a time
//              each row, else the image)       priv=x<S>  per-image copies in S per-thread
//   deint<M>   depth multiplier deinterleaved             slots
//   dyc        NCHW filter gradient: dy copied par=<vars> the outermost loops run on the
//                                                        thread pool (two or more threads)
//              channels-last                   dp2n      bf16 image pairs for vdpbf16ps
//                                              dp2t      ... and x's pairs by channel (AMX)
//   f32ops     16-bit depthwise: f32 operands  wdy, wxdy 16-bit: dy (and x) widened per image
//   dp2        bf16 output-channel pairs
//   nt         non-temporal output stores
//   split=<d>x<T>  the filter gradient's reduction split over T threads along d (n, oh, ow,
//              nb: the blocked batch, ohx: the row split), with private partial sums
//   acc=partial    one thread, 16-bit dW: f32 partial sums rounded once
//   wrow       NHWC depthwise data gradient: rows of the whole width (sliding-window tiles)
//   bcr        NHWC data gradient and forward: the border columns' pixels down H as tile rows
#pragma once

#include <string>

#include "codegen/cpu/cpu_plan.hpp"
#include "ir/ir.hpp"

namespace convjit::cpu {

/// The tokens after the layout, space-separated (what LoopNest::schedule_summary holds and the
/// IR printer shows): the plan's decisions and what the schedule `nest` made of them.
std::string schedule_tokens(const CpuPlan& plan, const ir::LoopNest& nest);

}  // namespace convjit::cpu
