// What a pass list is, for every backend: named functions from a LoopNest to an equivalent
// LoopNest, run in order, the nest printable after each one.
#pragma once

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/ir.hpp"

namespace convjit::ir {

/// Called with "lower" and the lowered nest, then with each pass's name and its result.
using PassObserver = std::function<void(std::string_view pass_name, const LoopNest& nest)>;

/// One pass of a backend's list: `run` carries out its part of `Plan` (a backend's plan type)
/// and decides nothing the plan has not decided.
template <typename Plan>
struct NamedPass {
  std::string_view name;
  LoopNest (*run)(LoopNest, const Plan&);
};

/// Runs `passes` in order over `nest`, showing each result to `observer`.
template <typename Plan>
LoopNest run_passes(LoopNest nest, const std::vector<NamedPass<Plan>>& passes, const Plan& plan,
                    const PassObserver& observer) {
  for (const NamedPass<Plan>& pass : passes) {
    nest = pass.run(std::move(nest), plan);
    if (observer) observer(pass.name, nest);
  }
  return nest;
}

}  // namespace convjit::ir
