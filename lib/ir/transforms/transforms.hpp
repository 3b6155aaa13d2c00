// Transformations that are true for every target: each takes a valid LoopNest and returns an
// equivalent one (interpreting before and after gives the same result), and none reads anything
// about the machine. Backends put them in their pass lists where they need them.
#pragma once

#include "ir/ir.hpp"

namespace convjit::ir {

/// Backprop data: splits each X spatial loop by residue mod stride (v = stride*q + r) and
/// re-indexes the taps that reach residue r as a dense strided subset, so every divisor and
/// every divisibility guard disappears. Afterwards all indices are affine.
LoopNest stride_residue_split(LoopNest nest);

/// Splits loops whose variable appears in tile guards into border parts and an interior where
/// every guard provably holds and is removed. Short border parts are unrolled to single
/// iterations, whose guards become tighter reduce-loop bounds.
LoopNest border_peel(LoopNest nest);

/// Joins adjacent serial loops over one variable whose bodies are the same code on every
/// iteration (peeled parts that blocking made alike) into one loop, so it is generated once.
LoopNest merge_equal_parts(LoopNest nest);

}  // namespace convjit::ir
