// An output that shares memory with an input is refused with InvalidArgument naming both
// operands, before anything is written: an exact alias, a partial overlap at either end, and
// an output inside an input. Tensors that only touch (one ends where the other begins) are
// fine and compute the reference's result. Through the C++ API (Kernel::run, run_reference)
// and the C ABI (convjit_run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "convjit/convjit.h"
#include "convjit/convjit.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

// Conv2DBackpropInput: a = filter [3,3,2,3] (54 floats), b = out_backprop [1,3,3,3] (27),
// out = the input gradient [1,6,6,2] (72).
const std::vector<std::int64_t> kFilter{3, 3, 2, 3};
const std::vector<std::int64_t> kDy{1, 3, 3, 3};
const std::vector<std::int64_t> kDx{1, 6, 6, 2};
constexpr std::int64_t kFilterElems = 54, kDyElems = 27, kDxElems = 72;

OpDescriptor descriptor() {
  OpDescriptor d;
  d.op = OpKind::kConv2DBackpropInput;
  d.input = kDx;
  d.filter = kFilter;
  d.out_backprop = kDy;
  d.strides = {1, 2, 2, 1};
  d.padding = Padding::kSame;
  return d;
}

// One arena all three tensors are placed in, at element offsets the test picks.
struct Arena {
  std::vector<float> data = std::vector<float>(1024, 0.0f);
  TensorView at(std::int64_t offset, const std::vector<std::int64_t>& shape) {
    return TensorView{DType::kFloat32, shape, data.data() + offset};
  }
  void fill_inputs(std::int64_t filter_at, std::int64_t dy_at) {
    for (std::int64_t i = 0; i < kFilterElems; ++i) data[filter_at + i] = 0.25f * (i % 7) - 0.5f;
    for (std::int64_t i = 0; i < kDyElems; ++i) data[dy_at + i] = 0.125f * (i % 5) - 0.25f;
  }
};

struct Layout {
  const char* label;
  std::int64_t filter_at, dy_at, dx_at;
  const char* overlapped;  // the input operand the output overlaps, or nullptr
};

const Layout kLayouts[] = {
    {"output is out_backprop", 0, 100, 100, "out_backprop"},
    {"output is filter", 300, 0, 300, "filter"},
    {"output ends inside out_backprop", 0, 171, 100, "out_backprop"},
    {"output starts in out_backprop's last element", 0, 100, 126, "out_backprop"},
    {"output starts in filter's last element", 0, 200, 53, "filter"},
    {"out_backprop inside the output", 0, 120, 100, "out_backprop"},
    {"output ends where out_backprop begins", 0, 172, 100, nullptr},
    {"output begins where out_backprop ends", 0, 100, 127, nullptr},
    {"output begins where filter ends, out_backprop right after it", 0, 126, 54, nullptr},
};

TEST(Aliasing, KernelRunRefusesOverlapAndAcceptsTouchingTensors) {
  const Kernel kernel = compile(descriptor());
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.label);
    Arena arena;
    arena.fill_inputs(l.filter_at, l.dy_at);
    const std::vector<float> before = arena.data;
    const TensorView a = arena.at(l.filter_at, kFilter), b = arena.at(l.dy_at, kDy),
                     out = arena.at(l.dx_at, kDx);
    if (l.overlapped != nullptr) {
      try {
        kernel.run(a, b, out);
        ADD_FAILURE() << "an overlapping output was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        const std::string message = e.what();
        EXPECT_NE(message.find("overlaps"), std::string::npos) << message;
        EXPECT_NE(message.find("'output (input gradient)'"), std::string::npos) << message;
        EXPECT_NE(message.find(std::string("'") + l.overlapped + "'"), std::string::npos)
            << message;
      }
      EXPECT_EQ(arena.data, before) << "a refused run wrote to memory";
      // The reference refuses the same operands.
      EXPECT_THROW(run_reference(descriptor(), a, b, out), Error);
    } else {
      kernel.run(a, b, out);
      std::vector<float> want(kDxElems);
      std::vector<float> inputs = before;  // the reference on separate copies of the inputs
      run_reference(descriptor(), TensorView{DType::kFloat32, kFilter, inputs.data() + l.filter_at},
                    TensorView{DType::kFloat32, kDy, inputs.data() + l.dy_at},
                    TensorView{DType::kFloat32, kDx, want.data()});
      for (std::int64_t i = 0; i < kDxElems; ++i) {
        EXPECT_NEAR(arena.data[l.dx_at + i], want[i], 1e-5) << "element " << i;
      }
      // The inputs around the output are untouched.
      for (std::int64_t i = 0; i < kFilterElems; ++i) {
        EXPECT_EQ(arena.data[l.filter_at + i], before[l.filter_at + i]);
      }
      for (std::int64_t i = 0; i < kDyElems; ++i) {
        EXPECT_EQ(arena.data[l.dy_at + i], before[l.dy_at + i]);
      }
    }
  }
}

TEST(Aliasing, EmptyTensorsNeverOverlap) {
  // An empty output writes nothing, so it may sit anywhere, even on an input.
  OpDescriptor d = descriptor();
  d.input = {0, 6, 6, 2};
  d.out_backprop = {0, 3, 3, 3};
  const Kernel kernel = compile(d);
  Arena arena;
  arena.fill_inputs(0, 100);
  kernel.run(arena.at(0, kFilter), arena.at(100, {0, 3, 3, 3}), arena.at(0, {0, 6, 6, 2}));
  // An empty input overlaps nothing either.
  OpDescriptor f = descriptor();
  f.op = OpKind::kConv2DBackpropFilter;
  f.input = {0, 6, 6, 2};
  f.out_backprop = {0, 3, 3, 3};
  const Kernel filter_grad = compile(f);
  Arena zeros;
  std::fill(zeros.data.begin(), zeros.data.end(), 7.0f);
  filter_grad.run(zeros.at(10, {0, 6, 6, 2}), zeros.at(10, {0, 3, 3, 3}), zeros.at(0, kFilter));
  for (std::int64_t i = 0; i < kFilterElems; ++i) EXPECT_EQ(zeros.data[i], 0.0f);
}

TEST(Aliasing, OtherOpsNameTheirOwnOperands) {
  // Forward: out = output, overlapping the input.
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.input = {1, 4, 4, 2};
  d.filter = {3, 3, 2, 2};
  d.strides = {1, 1, 1, 1};
  d.padding = Padding::kSame;
  const Kernel kernel = compile(d);
  Arena arena;
  try {
    kernel.run(arena.at(0, {1, 4, 4, 2}), arena.at(100, {3, 3, 2, 2}), arena.at(31, {1, 4, 4, 2}));
    ADD_FAILURE() << "an overlapping output was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'output' ("), std::string::npos) << message;
    EXPECT_NE(message.find("'input' ("), std::string::npos) << message;
    EXPECT_EQ(message.find("'filter'"), std::string::npos) << message;
  }
}

convjit_tensor c_tensor(float* data, const std::vector<std::int64_t>& shape) {
  convjit_tensor t{};
  t.dtype = CONVJIT_FLOAT32;
  t.rank = static_cast<int32_t>(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.data = data;
  return t;
}

TEST(Aliasing, CApiRefusesOverlapAndAcceptsTouchingTensors) {
  convjit_kernel* kernel = nullptr;
  ASSERT_EQ(convjit_compile_text(to_text(descriptor()).c_str(), &kernel), CONVJIT_OK)
      << convjit_last_error();
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.label);
    Arena arena;
    arena.fill_inputs(l.filter_at, l.dy_at);
    const std::vector<float> before = arena.data;
    const convjit_tensor a = c_tensor(arena.data.data() + l.filter_at, kFilter);
    const convjit_tensor b = c_tensor(arena.data.data() + l.dy_at, kDy);
    const convjit_tensor out = c_tensor(arena.data.data() + l.dx_at, kDx);
    const convjit_status status = convjit_run(kernel, &a, &b, &out);
    if (l.overlapped != nullptr) {
      EXPECT_EQ(status, CONVJIT_INVALID_ARGUMENT);
      const std::string message = convjit_last_error();
      EXPECT_NE(message.find("overlaps"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("'") + l.overlapped + "'"), std::string::npos) << message;
      EXPECT_EQ(arena.data, before) << "a refused run wrote to memory";
    } else {
      EXPECT_EQ(status, CONVJIT_OK) << convjit_last_error();
      std::vector<float> want(kDxElems);
      std::vector<float> inputs = before;
      run_reference(descriptor(), TensorView{DType::kFloat32, kFilter, inputs.data() + l.filter_at},
                    TensorView{DType::kFloat32, kDy, inputs.data() + l.dy_at},
                    TensorView{DType::kFloat32, kDx, want.data()});
      for (std::int64_t i = 0; i < kDxElems; ++i) {
        EXPECT_NEAR(arena.data[l.dx_at + i], want[i], 1e-5) << "element " << i;
      }
    }
  }
  convjit_destroy(kernel);
}

}  // namespace
}  // namespace convjit
