// A C++17 program built against an installed convjit (find_package or pkg-config): it uses the
// C++ API, the C ABI, the cache API and the version macros, and checks what it gets. It links
// against the exported symbols only, so a public function the library failed to export fails
// its link. Exit status 0 only if every check passes.
#include <convjit/cache.h>
#include <convjit/convjit.h>
#include <convjit/version.h>

#include <cmath>
#include <convjit/convjit.hpp>
#include <convjit/numeric.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

void fill(convjit::Tensor& t, float scale) {
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    t.data_as<float>()[i] = scale * static_cast<float>((i * 7) % 11 - 5);
  }
}

double max_difference(const convjit::Tensor& a, const convjit::Tensor& b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.elements(); ++i) {
    worst = std::fmax(worst, std::fabs(a.data_as<float>()[i] - b.data_as<float>()[i]));
  }
  return worst;
}

void cpp_api() {
  convjit::OpDescriptor desc;
  desc.op = convjit::OpKind::kConv2DBackpropInput;
  desc.dtype = convjit::DType::kFloat32;
  desc.input = {2, 9, 9, 8};
  desc.filter = {3, 3, 8, 16};
  desc.out_backprop = {2, 5, 5, 16};
  desc.strides = {1, 2, 2, 1};
  desc.padding = convjit::Padding::kSame;

  const convjit::Kernel kernel = convjit::compile(desc);
  check(kernel.valid() && !kernel.name().empty(), "compile gives a named kernel");
  check(convjit::parse_descriptor(convjit::to_text(desc)) == desc, "descriptor text round trip");
  convjit::Tensor filter(desc.dtype, kernel.operand_shape(0));
  convjit::Tensor dy(desc.dtype, kernel.operand_shape(1));
  convjit::Tensor dx(desc.dtype, kernel.operand_shape(2)),
      expected(desc.dtype, kernel.operand_shape(2));
  fill(filter, 0.25f);
  fill(dy, 0.5f);
  kernel.run(filter.view(), dy.view(), dx.view());
  convjit::run_reference(desc, filter.view(), dy.view(), expected.view());
  check(max_difference(dx, expected) < 1e-4, "kernel matches the reference");

  const convjit::Tensor helper =
      convjit::conv2d_backprop_input({2, 9, 9, 8}, filter.view(), dy.view(), {1, 2, 2, 1}, "SAME");
  check(max_difference(helper, expected) < 1e-4, "the TensorFlow-shaped helper matches");

  // convjit::Error crosses the library boundary and is caught by its type.
  bool caught = false;
  try {
    convjit::OpDescriptor bad = desc;
    bad.strides = {2, 1, 1, 1};
    convjit::compile(bad);
  } catch (const convjit::Error& e) {
    caught = e.kind() == convjit::ErrorKind::kUnimplemented &&
             std::string(e.what()).find("strides in the batch and depth") != std::string::npos;
  }
  check(caught, "a bad descriptor throws convjit::Error with TensorFlow's message");
}

void c_api() {
  const std::int64_t input_sizes[4] = {1, 3, 3, 1}, filter_shape[4] = {2, 2, 1, 1};
  const std::int64_t out_backprop[4] = {1, 2, 2, 1}, strides[4] = {1, 1, 1, 1};
  convjit_op_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.op = "Conv2DBackpropInput";
  desc.dtype = CONVJIT_FLOAT32;
  desc.padding = "VALID";
  desc.input = input_sizes;
  desc.input_len = 4;
  desc.filter = filter_shape;
  desc.filter_len = 4;
  desc.out_backprop = out_backprop;
  desc.out_backprop_len = 4;
  desc.strides = strides;
  desc.strides_len = 4;
  convjit_kernel* kernel = nullptr;
  check(convjit_compile(&desc, &kernel) == CONVJIT_OK,
        std::string("C compile: ") + convjit_last_error());
  float w[4] = {1, 2, 3, 4}, dy[4] = {1, 2, 3, 4}, dx[9] = {};
  convjit_tensor a{}, b{}, out{};
  for (convjit_tensor* t : {&a, &b, &out}) {
    t->dtype = CONVJIT_FLOAT32;
    t->rank = 4;
  }
  std::memcpy(a.shape, filter_shape, sizeof filter_shape);
  std::memcpy(b.shape, out_backprop, sizeof out_backprop);
  std::memcpy(out.shape, input_sizes, sizeof input_sizes);
  a.data = w;
  b.data = dy;
  out.data = dx;
  check(convjit_run(kernel, &a, &b, &out) == CONVJIT_OK, "C run");
  const float want[9] = {1, 4, 4, 6, 20, 16, 9, 24, 16};
  for (int i = 0; i < 9; ++i) check(dx[i] == want[i], "C result " + std::to_string(i));
  convjit_destroy(kernel);
}

void numeric() {
  check(convjit::half_to_float(convjit::float_to_half(1.5f)) == 1.5f, "half round trip");
  check(convjit::bfloat16_to_float(convjit::float_to_bfloat16(-2.0f)) == -2.0f,
        "bfloat16 round trip");
  std::uint16_t word = 0;
  convjit::store_from_double(convjit::DType::kBFloat16, &word, 0, 0.5);
  check(convjit::load_as_double(convjit::DType::kBFloat16, &word, 0) == 0.5,
        "load/store as double");
}

void version_and_cache() {
  check(std::string(convjit_version()) == CONVJIT_VERSION_STRING,
        "convjit_version() matches version.h");
  check(CONVJIT_VERSION_NUMBER >= 100, "CONVJIT_VERSION_NUMBER");
  char* json = nullptr;
  check(convjit_cache_stats_json(&json) == CONVJIT_OK && json != nullptr &&
            std::strstr(json, "\"entries\"") != nullptr,
        "cache stats as JSON");
  convjit_free_string(json);
}

}  // namespace

int main() {
  try {
    cpp_api();
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  c_api();
  numeric();
  version_and_cache();
  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("consumer: convjit %s, every check passed\n", convjit_version());
  return 0;
}
