// The schedule pipeline: the list of passes a LoopNest goes through, in order.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "frontend/problem.hpp"
#include "ir/ir.hpp"
#include "ir/pass.hpp"
#include "ir/target.hpp"

namespace convjit::ir {

/// The passes, in the order they run: one job, one file under lib/ir/passes/.
const std::vector<NamedPass<Target>>& schedule_passes();


/// Every pass of schedule_passes() over a lowered nest.
LoopNest schedule(LoopNest nest, const Target& target, const PassObserver& observer = {});

/// lower() followed by every pass of schedule_passes().
LoopNest lower_and_schedule(const ConvProblem& problem, const Target& target,
                            const PassObserver& observer = {});

}  // namespace convjit::ir
