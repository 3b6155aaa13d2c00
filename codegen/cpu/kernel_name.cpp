#include "codegen/cpu/kernel_name.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {
namespace {

using namespace ir;

// The register tile computing the most outputs, each tile's outputs counted once per execution
// of the loops around it: "r<rows>x<cols>", "e" for the elementwise (depthwise) form.
std::string main_tile(const LoopNest& nest) {
  std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::int64_t> outputs;
  std::function<void(const std::vector<Stmt>&, std::int64_t)> walk =
      [&](const std::vector<Stmt>& body, std::int64_t runs) {
        for (const Stmt& s : body) {
          if (const auto* l = std::get_if<Loop>(&s.node)) {
            walk(l->body, runs * std::max<std::int64_t>(l->trip_count(), 0));
          } else if (const auto* t = std::get_if<Tile>(&s.node)) {
            if (t->rows * t->cols <= 1) continue;
            // Elementwise: the operand that moves with the rows (a) is a vector along the
            // columns too, where an outer product broadcasts it.
            Affine a;
            const bool elementwise =
                t->cols > 1 && flatten_access(nest, t->a, &a) && a.coef_of(t->col_var) != 0;
            outputs[{t->rows, t->cols, elementwise}] += runs * t->rows * t->cols;
          }
        }
      };
  walk(nest.body, 1);
  const auto best = std::max_element(outputs.begin(), outputs.end(), [](const auto& x, const auto& y) {
    return x.second < y.second;
  });
  if (best == outputs.end()) return {};
  const auto [rows, cols, elementwise] = best->first;
  return fmt::format("r{}x{}{}", rows, cols, elementwise ? "e" : "");
}

// Whether `holds` is true of some tile or store of `body`, in its loops too.
bool some_statement(const std::vector<Stmt>& body, const std::function<bool(const Stmt&)>& holds) {
  for (const Stmt& s : body) {
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      if (some_statement(l->body, holds)) return true;
    } else if (holds(s)) {
      return true;
    }
  }
  return false;
}

// Whether a copy of dy got zero borders: zero stores into a copy of it.
bool padded_copies(const LoopNest& nest) {
  return some_statement(nest.body, [&](const Stmt& s) {
    const auto* st = std::get_if<Store>(&s.node);
    return st != nullptr && !st->has_src &&
           nest.buffers[static_cast<std::size_t>(st->dst.buffer)].role ==
               BufferRole::kOutBackpropCopy;
  });
}

// Whether some tile or copy stores with non-temporal stores.
bool streams(const std::vector<Stmt>& body) {
  return some_statement(body, [](const Stmt& s) {
    const auto* t = std::get_if<Tile>(&s.node);
    return t != nullptr ? t->stream : std::get<Store>(s.node).stream;
  });
}

// Whether some tile prefetches its next row group.
bool prefetches(const std::vector<Stmt>& body) {
  return some_statement(body, [](const Stmt& s) {
    const auto* t = std::get_if<Tile>(&s.node);
    return t != nullptr && t->prefetch_next_rows;
  });
}

// Whether some tile prefetches its next block of reduction points.
bool prefetches_next_blocks(const std::vector<Stmt>& body) {
  return some_statement(body, [](const Stmt& s) {
    const auto* t = std::get_if<Tile>(&s.node);
    return t != nullptr && (t->prefetch_next_block_a != 0 || t->prefetch_next_block_b != 0);
  });
}

// The variables of the outermost loops that run on the thread pool, sorted.
std::vector<std::string> parallel_loops(const LoopNest& nest) {
  std::vector<std::string> names;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (const auto* l = std::get_if<Loop>(&s.node)) {
        if (l->kind == LoopKind::kParallel) {
          names.push_back(nest.var_names[static_cast<std::size_t>(l->var)]);
        } else {
          walk(l->body);
        }
      }
    }
  };
  walk(nest.body);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// The slots of a filter gradient's per-call copy of dy once it moved into the batch loop, one
// image at a time (0 while it is still made for the whole batch up front).
std::int64_t copy_slots(const LoopNest& nest) {
  const int copy = nest.buffer_of_role(BufferRole::kOutBackpropCopy);
  if (copy < 0) return 0;
  bool inside = false;
  std::function<void(const std::vector<Stmt>&, int)> walk = [&](const std::vector<Stmt>& body,
                                                                int depth) {
    for (const Stmt& s : body) {
      if (const auto* l = std::get_if<Loop>(&s.node)) {
        // Below a loop that holds tiles (the batch), not in a top-level copy nest.
        walk(l->body, has_tile(l->body) ? depth + 1 : depth);
      } else if (const auto* st = std::get_if<Store>(&s.node)) {
        inside = inside || (depth > 0 && st->dst.buffer == copy);
      }
    }
  };
  walk(nest.body, 0);
  return inside ? nest.buffers[static_cast<std::size_t>(copy)].dims.front() : 0;
}

// The filter gradient's batch copies as the schedule made them: pairs, widened (w) or padded
// (rs) copies of x, dy or both.
std::string batch_copies(const CpuPlan& plan, const LoopNest& nest) {
  const bool paired = some_statement(nest.body, [](const Stmt& s) {
    const auto* t = std::get_if<Tile>(&s.node);
    return t != nullptr && t->paired;
  });
  if (paired) {
    const auto padding = nest.derived.find("out_backprop_pair_padding");
    const std::string padded =
        padding != nest.derived.end() ? fmt::format(",ypad{}", padding->second) : "";
    // Pairs of images (n; an odd last image's row chunks may pair too), or only of row chunks
    // of one image (h).
    const char* members = nest.derived.count("row_chunk_pairs") > 0 ? "dp2h" : "dp2n";
    return (nest.buffer_of_role(BufferRole::kInputByChannelCopy) >= 0 ? "dp2t" : members) + padded;
  }
  const bool x = nest.buffer_of_role(BufferRole::kInputCopy) >= 0;
  const bool dy = nest.buffer_of_role(BufferRole::kOutBackpropCopy) >= 0;
  if (!x && !dy) return "";
  const char* prefix = plan.batch_copies == BatchCopies::kRestride ? "rs" : "w";
  return fmt::format("{}{}", prefix, x ? (dy ? "xdy" : "x") : "dy");
}

}  // namespace

std::string schedule_tokens(const CpuPlan& plan, const LoopNest& nest) {
  const ConvProblem& p = nest.problem;
  std::vector<std::string> t;
  auto add = [&](bool present, std::string token) {
    if (present && !token.empty()) t.push_back(std::move(token));
  };
  add(plan.pixels_as_one_row, "px");
  add(plan.channels_last_copies, "tonhwc");
  add(plan.transposed_out_backprop, "wvec");
  add(plan.channels_first_out_backprop_copy, plan.repeated_columns ? "dyp2" : "dyp");
  add(p.direction == ConvDirection::kBackpropData && (plan.residues_h > 1 || plan.residues_w > 1),
      fmt::format("res{}x{}", plan.residues_h, plan.residues_w));
  add(plan.pad_out_backprop_copies && padded_copies(nest), "zpad");
  add(plan.pack_filter, "pack");
  const bool around_batch = nest.derived.contains("channel_blocks_around_batch");
  add(plan.channel_block > 0,
      fmt::format("cb{}{}", plan.channel_block,
                  plan.channel_blocks_inside_pixels ? "p"
                  : plan.channel_blocks_around_rows ? "r"
                  : around_batch                    ? "b"
                                                    : ""));
  add(plan.deinterleave_multiplier, fmt::format("deint{}", p.oc_per_group()));
  add(plan.channels_last_out_backprop, "dyc");
  add(plan.widen_depthwise_operands, "f32ops");
  add(plan.whole_width_rows, "wrow");
  const auto border_rows = nest.derived.find("border_columns_as_rows");
  add(border_rows != nest.derived.end() && border_rows->second > 0, "bcr");
  const auto shared_taps = nest.derived.find("taps_share_out_backprop");
  add(shared_taps != nest.derived.end() && shared_taps->second > 0, "tkw");
  add(true, main_tile(nest));
  add(plan.pair_output_channels, "dp2");
  const auto rows = nest.derived.find("chunk_rows");
  if (rows != nest.derived.end()) {
    add(plan.reduction_blocking == ReductionBlocking::kRowSplit,
        fmt::format("blk=ohx{},oh{}", plan.threads, rows->second));
    add(plan.reduction_blocking == ReductionBlocking::kBatchChunks,
        rows->second < p.oh   ? fmt::format("blk=n,oh{}", rows->second)
        : plan.chunk_images > 1 ? fmt::format("blk=n{}", plan.chunk_images)
                                : std::string("blk=n"));
  }
  add(plan.rereads_out_backprop, "rdy");
  add(plan.privatize_batch_copies, fmt::format("priv=x{}", plan.threads));
  add(plan.stream_output && streams(nest.body), "nt");
  add(plan.prefetch_streamed_rows && prefetches(nest.body), "pf");
  add(plan.prefetch_streamed_rows && prefetches_next_blocks(nest.body), "pfb");
  const std::int64_t slots =
      p.direction == ConvDirection::kBackpropFilter && plan.channels_last_out_backprop
          ? copy_slots(nest)
          : 0;
  add(plan.partial_sums_for_rounding, "acc=partial");
  add(slots > 0, fmt::format("priv=x{}", slots));
  // One thread runs even a split's single chunk on the calling thread: no pool.
  const std::vector<std::string> par =
      plan.threads > 1 ? parallel_loops(nest) : std::vector<std::string>{};
  add(!par.empty(), fmt::format("par={}", fmt::join(par, ",")));
  switch (plan.reduction_split) {
    case ReductionSplit::kNone: break;
    case ReductionSplit::kRowThreads: add(true, fmt::format("split=ohx{}", plan.threads)); break;
    case ReductionSplit::kBatch: add(true, fmt::format("split=nbx{}", plan.threads)); break;
    case ReductionSplit::kDims: {
      static constexpr const char* kDims[3] = {"n", "oh", "ow"};
      add(true, fmt::format("split={}x{}", kDims[plan.split_dim], plan.split_chunks));
      break;
    }
  }
  add(plan.output_slices > 1, fmt::format("slice={}x{}", plan.slices_of_input_channels ? "ic" : "oc",
                                          plan.output_slices));
  add(plan.batch_copies != BatchCopies::kNone, batch_copies(plan, nest));
  return fmt::format("{}", fmt::join(t, " "));
}

}  // namespace convjit::cpu
