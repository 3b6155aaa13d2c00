#include "support/ir_test_problems.hpp"

namespace convjit::testing {

ConvProblem strided_backprop_data() {
  ConvProblem p;
  p.direction = ConvDirection::kBackpropData;
  p.n = 1;
  p.ih = p.iw = 5;
  p.ic = p.filter_in = 3;
  p.kh = p.kw = 3;
  p.oc = 2;
  p.stride_h = p.stride_w = 2;
  p.oh = p.ow = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  return p;
}

cpu::testing::TestTarget avx2_target(std::int64_t l2_bytes) {
  cpu::testing::TestTarget t;
  t.isa = cpu::Isa::kAvx2;
  t.vector_bytes = 32;
  t.vector_registers = 16;
  t.has_fma = t.has_f16c = true;
  t.l2_bytes = l2_bytes;
  return t;
}

}  // namespace convjit::testing
