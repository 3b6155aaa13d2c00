// The C ABI: NULL handling everywhere, status codes and last-error messages, descriptor
// conversion (defaults, lengths), the text entry point and the parallel_for hook.
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convjit/convjit.h"
#include "convjit/convjit.hpp"
#include "support/test_tensors.hpp"

namespace {

struct DescStorage {
  std::vector<int64_t> input{1, 6, 6, 2};
  std::vector<int64_t> filter{3, 3, 2, 3};
  std::vector<int64_t> out_backprop{1, 3, 3, 3};
  std::vector<int64_t> strides{1, 2, 2, 1};
  convjit_op_desc desc{};

  DescStorage() {
    desc.op = "Conv2DBackpropInput";
    desc.dtype = CONVJIT_FLOAT32;
    desc.padding = "SAME";
    desc.input = input.data();
    desc.input_len = static_cast<int32_t>(input.size());
    desc.filter = filter.data();
    desc.filter_len = static_cast<int32_t>(filter.size());
    desc.out_backprop = out_backprop.data();
    desc.out_backprop_len = static_cast<int32_t>(out_backprop.size());
    desc.strides = strides.data();
    desc.strides_len = static_cast<int32_t>(strides.size());
  }
};

convjit_tensor c_tensor(const convjit::testing::TestTensor& t) {
  convjit_tensor c{};
  c.dtype = static_cast<convjit_dtype>(t.dtype());
  c.rank = static_cast<int32_t>(t.shape().size());
  for (std::size_t i = 0; i < t.shape().size(); ++i) c.shape[i] = t.shape()[i];
  c.data = const_cast<void*>(t.data());
  return c;
}

void expect_status(convjit_status got, convjit_status want, const std::string& message_part) {
  EXPECT_EQ(got, want) << convjit_status_name(got) << ": " << convjit_last_error();
  EXPECT_NE(std::string(convjit_last_error()).find(message_part), std::string::npos)
      << "'" << message_part << "' not in: " << convjit_last_error();
}

TEST(ApiC, CompileRunMatchesTheReference) {
  DescStorage s;
  convjit_kernel* kernel = nullptr;
  ASSERT_EQ(convjit_compile(&s.desc, &kernel), CONVJIT_OK) << convjit_last_error();
  int64_t shape[CONVJIT_MAX_RANK];
  ASSERT_EQ(convjit_kernel_operand_shape(kernel, 0, shape), 4);
  const std::vector<int64_t> filter_shape(shape, shape + 4);
  ASSERT_EQ(convjit_kernel_operand_shape(kernel, 2, shape), 4);
  const std::vector<int64_t> out_shape(shape, shape + 4);
  EXPECT_EQ(out_shape, s.input);

  const auto filter = convjit::testing::random_tensor(convjit::DType::kFloat32, filter_shape, 1);
  const auto dy = convjit::testing::random_tensor(convjit::DType::kFloat32, s.out_backprop, 2);
  convjit::testing::TestTensor got(convjit::DType::kFloat32, out_shape);
  convjit::testing::TestTensor want(convjit::DType::kFloat32, out_shape);
  const convjit_tensor a = c_tensor(filter), b = c_tensor(dy), out = c_tensor(got);
  ASSERT_EQ(convjit_run(kernel, &a, &b, &out), CONVJIT_OK) << convjit_last_error();

  convjit::OpDescriptor desc = convjit::parse_descriptor(convjit_kernel_descriptor(kernel));
  EXPECT_EQ(desc.dilations, (std::vector<int64_t>{1, 1, 1, 1}));  // NULL dilations: ones
  EXPECT_EQ(desc.data_format, convjit::DataFormat::kNHWC);        // NULL data_format: NHWC
  convjit::run_reference(desc, filter.view(), dy.view(), want.view());
  EXPECT_TRUE(convjit::testing::all_close(got.view(), want.view(),
                                          convjit::testing::tolerance(convjit::DType::kFloat32, 27)));
  EXPECT_GT(std::strlen(convjit_kernel_name(kernel)), 0u);
  convjit_destroy(kernel);
}

TEST(ApiC, CompileTextAndPythonOpNames) {
  DescStorage s;
  s.desc.op = "conv2d_backprop_input";
  convjit_kernel* from_struct = nullptr;
  ASSERT_EQ(convjit_compile(&s.desc, &from_struct), CONVJIT_OK) << convjit_last_error();
  convjit_kernel* from_text = nullptr;
  ASSERT_EQ(convjit_compile_text(convjit_kernel_descriptor(from_struct), &from_text), CONVJIT_OK)
      << convjit_last_error();
  EXPECT_STREQ(convjit_kernel_descriptor(from_text), convjit_kernel_descriptor(from_struct));
  EXPECT_STREQ(convjit_kernel_name(from_text), convjit_kernel_name(from_struct));
  convjit_destroy(from_text);
  convjit_destroy(from_struct);
  expect_status(convjit_compile_text("not a descriptor", &from_text), CONVJIT_INVALID_ARGUMENT, "");
  EXPECT_EQ(from_text, nullptr);
}

TEST(ApiC, NullPointersAreInvalidArguments) {
  DescStorage s;
  convjit_kernel* kernel = nullptr;
  expect_status(convjit_compile(nullptr, &kernel), CONVJIT_INVALID_ARGUMENT, "desc is NULL");
  expect_status(convjit_compile(&s.desc, nullptr), CONVJIT_INVALID_ARGUMENT, "out is NULL");
  expect_status(convjit_compile_text(nullptr, &kernel), CONVJIT_INVALID_ARGUMENT, "NULL");
  s.desc.op = nullptr;
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "op is NULL");
  s.desc.op = "Conv2DBackpropInput";
  s.desc.padding = nullptr;
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "padding is NULL");
  s.desc.padding = "SAME";
  s.desc.filter = nullptr;
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "filter is NULL");
  s.desc.filter = s.filter.data();

  ASSERT_EQ(convjit_compile(&s.desc, &kernel), CONVJIT_OK) << convjit_last_error();
  convjit_tensor t{};
  expect_status(convjit_run(nullptr, &t, &t, &t), CONVJIT_INVALID_ARGUMENT, "kernel is NULL");
  expect_status(convjit_run(kernel, nullptr, &t, &t), CONVJIT_INVALID_ARGUMENT, "a is NULL");
  expect_status(convjit_run(kernel, &t, &t, nullptr), CONVJIT_INVALID_ARGUMENT, "out is NULL");
  int64_t shape[CONVJIT_MAX_RANK];
  EXPECT_EQ(convjit_kernel_operand_shape(nullptr, 0, shape), -1);
  EXPECT_EQ(convjit_kernel_operand_shape(kernel, 3, shape), -1);
  EXPECT_EQ(convjit_kernel_operand_shape(kernel, 0, nullptr), -1);
  EXPECT_STREQ(convjit_kernel_name(nullptr), "");
  convjit_destroy(kernel);
  convjit_destroy(nullptr);
}

TEST(ApiC, BadLengthsAndEnumsAreRefusedBeforeReading) {
  DescStorage s;
  convjit_kernel* kernel = nullptr;
  s.desc.strides_len = -1;
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "strides_len");
  s.desc.strides_len = 1 << 30;
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "strides_len");
  s.desc.strides_len = 4;
  s.desc.dilations_len = 4;  // NULL with a length: a caller bug, not "all ones"
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "dilations");
  s.desc.dilations_len = 0;
  s.desc.dtype = static_cast<convjit_dtype>(17);
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "dtype");
  s.desc.dtype = CONVJIT_FLOAT32;
  s.desc.op = "Conv3D";
  expect_status(convjit_compile(&s.desc, &kernel), CONVJIT_INVALID_ARGUMENT, "");
  EXPECT_EQ(kernel, nullptr);
}

TEST(ApiC, RunChecksShapesAndDtypes) {
  DescStorage s;
  convjit_kernel* kernel = nullptr;
  ASSERT_EQ(convjit_compile(&s.desc, &kernel), CONVJIT_OK) << convjit_last_error();
  const auto filter = convjit::testing::random_tensor(convjit::DType::kFloat32, s.filter, 1);
  const auto dy = convjit::testing::random_tensor(convjit::DType::kFloat32, s.out_backprop, 2);
  convjit::testing::TestTensor dx(convjit::DType::kFloat32, s.input);
  convjit_tensor a = c_tensor(filter), b = c_tensor(dy), out = c_tensor(dx);
  out.shape[3] = 5;
  expect_status(convjit_run(kernel, &a, &b, &out), CONVJIT_INVALID_ARGUMENT, "expected [1,6,6,2]");
  out.shape[3] = 2;
  b.rank = 9;
  expect_status(convjit_run(kernel, &a, &b, &out), CONVJIT_INVALID_ARGUMENT, "rank");
  b.rank = 4;
  a.dtype = CONVJIT_BFLOAT16;
  expect_status(convjit_run(kernel, &a, &b, &out), CONVJIT_INVALID_ARGUMENT, "bfloat16");
  a.dtype = CONVJIT_FLOAT32;
  EXPECT_EQ(convjit_run(kernel, &a, &b, &out), CONVJIT_OK) << convjit_last_error();
  convjit_destroy(kernel);
}

std::atomic<int> g_hook_calls{0};

void count_and_run(void* ctx, int64_t n, void (*body)(void*, int64_t, int64_t), void* body_ctx) {
  ++g_hook_calls;
  EXPECT_EQ(ctx, &g_hook_calls);
  for (int64_t i = 0; i < n; ++i) body(body_ctx, i, i + 1);
}

TEST(ApiC, ParallelForHookRunsTheLoops) {
  ASSERT_EQ(convjit_set_parallel_for(&count_and_run, &g_hook_calls), CONVJIT_OK);
  convjit::OpDescriptor desc;
  desc.input = {4, 16, 16, 8};
  desc.filter = {3, 3, 8, 8};
  desc.out_backprop = {4, 16, 16, 8};
  desc.padding = convjit::Padding::kSame;
  convjit::CompileOptions options;
  options.num_threads = 4;
  const convjit::Kernel kernel = convjit::compile(desc, options);
  const auto filter = convjit::testing::random_tensor(convjit::DType::kFloat32, desc.filter, 1);
  const auto dy = convjit::testing::random_tensor(convjit::DType::kFloat32, desc.out_backprop, 2);
  convjit::testing::TestTensor got(convjit::DType::kFloat32, desc.input);
  convjit::testing::TestTensor want(convjit::DType::kFloat32, desc.input);
  kernel.run(filter.view(), dy.view(), got.view());
  EXPECT_GT(g_hook_calls.load(), 0) << kernel.name();
  ASSERT_EQ(convjit_set_parallel_for(nullptr, nullptr), CONVJIT_OK);
  const int calls = g_hook_calls.load();
  kernel.run(filter.view(), dy.view(), got.view());
  EXPECT_EQ(g_hook_calls.load(), calls);  // restored to convjit's pool
  convjit::run_reference(desc, filter.view(), dy.view(), want.view());
  EXPECT_TRUE(convjit::testing::all_close(got.view(), want.view(),
                                          convjit::testing::tolerance(convjit::DType::kFloat32, 72)));
}

TEST(ApiC, StatusNames) {
  EXPECT_STREQ(convjit_status_name(CONVJIT_OK), "OK");
  EXPECT_STREQ(convjit_status_name(CONVJIT_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(convjit_status_name(CONVJIT_INTERNAL), "INTERNAL");
}

std::atomic<int> g_run_loop_calls{0};

void count_run_loop(void* ctx, int64_t n, void (*body)(void*, int64_t, int64_t), void* body_ctx) {
  ++g_run_loop_calls;
  EXPECT_EQ(ctx, &g_run_loop_calls);
  // Chunks in reverse: the kernel must not depend on the order the pool runs them in.
  for (int64_t i = n - 1; i >= 0; --i) body(body_ctx, i, i + 1);
}

TEST(ApiC, RunWithParallelForUsesTheCallersLoopForThatRunOnly) {
  DescStorage s;
  s.desc.op = "Conv2DBackpropFilter";
  s.input = {4, 16, 16, 8};
  s.filter = {3, 3, 8, 8};
  s.out_backprop = {4, 16, 16, 8};
  s.strides = {1, 1, 1, 1};
  s.desc.input = s.input.data();
  s.desc.filter = s.filter.data();
  s.desc.out_backprop = s.out_backprop.data();
  s.desc.strides = s.strides.data();
  convjit_compile_options options{};
  options.num_threads = 4;
  convjit_kernel* kernel = nullptr;
  ASSERT_EQ(convjit_compile_with_options(&s.desc, &options, &kernel), CONVJIT_OK)
      << convjit_last_error();
  const auto x = convjit::testing::random_tensor(convjit::DType::kFloat32, s.input, 1);
  const auto dy = convjit::testing::random_tensor(convjit::DType::kFloat32, s.out_backprop, 2);
  convjit::testing::TestTensor got(convjit::DType::kFloat32, s.filter);
  convjit::testing::TestTensor want(convjit::DType::kFloat32, s.filter);
  convjit_tensor a = c_tensor(x), b = c_tensor(dy), out = c_tensor(got);
  ASSERT_EQ(convjit_run_with_parallel_for(kernel, &a, &b, &out, nullptr, &count_run_loop,
                                          &g_run_loop_calls),
            CONVJIT_OK)
      << convjit_last_error();
  EXPECT_GT(g_run_loop_calls.load(), 0) << convjit_kernel_name(kernel);
  convjit::OpDescriptor desc;
  desc.op = convjit::OpKind::kConv2DBackpropFilter;
  desc.input = s.input;
  desc.filter = s.filter;
  desc.out_backprop = s.out_backprop;
  desc.padding = convjit::Padding::kSame;
  convjit::run_reference(desc, x.view(), dy.view(), want.view());
  EXPECT_TRUE(convjit::testing::all_close(
      got.view(), want.view(), convjit::testing::tolerance(convjit::DType::kFloat32, 4 * 16 * 16)));

  // Not a hook: a later run without a loop of its own goes back to convjit's pool.
  const int calls = g_run_loop_calls.load();
  ASSERT_EQ(convjit_run(kernel, &a, &b, &out), CONVJIT_OK) << convjit_last_error();
  ASSERT_EQ(convjit_run_with_parallel_for(kernel, &a, &b, &out, nullptr, nullptr, nullptr),
            CONVJIT_OK)
      << convjit_last_error();
  EXPECT_EQ(g_run_loop_calls.load(), calls);

  // Bad operands are refused as by convjit_run, the loop never called.
  out.shape[0] = 2;
  expect_status(convjit_run_with_parallel_for(kernel, &a, &b, &out, nullptr, &count_run_loop,
                                              &g_run_loop_calls),
                CONVJIT_INVALID_ARGUMENT, "expected [3,3,8,8]");
  EXPECT_EQ(g_run_loop_calls.load(), calls);
  expect_status(convjit_run_with_parallel_for(nullptr, &a, &b, &out, nullptr, nullptr, nullptr),
                CONVJIT_INVALID_ARGUMENT, "kernel is NULL");
  convjit_destroy(kernel);
}

TEST(ApiC, InferOutputShapeValidatesWithoutCompiling) {
  DescStorage s;
  int64_t shape[CONVJIT_MAX_RANK] = {};
  ASSERT_EQ(convjit_infer_output_shape(&s.desc, shape), CONVJIT_OK) << convjit_last_error();
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 4), (std::vector<int64_t>{1, 6, 6, 2}));

  std::vector<int64_t> input{2, 9, 7, 4}, filter{3, 2, 4, 6}, strides{1, 2, 3, 1};
  convjit_op_desc forward{};
  forward.op = "conv2d";
  forward.dtype = CONVJIT_FLOAT64;
  forward.padding = "VALID";
  forward.input = input.data();
  forward.input_len = 4;
  forward.filter = filter.data();
  forward.filter_len = 4;
  forward.strides = strides.data();
  forward.strides_len = 4;
  ASSERT_EQ(convjit_infer_output_shape(&forward, shape), CONVJIT_OK) << convjit_last_error();
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 4), (std::vector<int64_t>{2, 4, 2, 6}));

  strides = {2, 1, 1, 1};
  expect_status(convjit_infer_output_shape(&forward, shape), CONVJIT_UNIMPLEMENTED,
                "strides in the batch and depth dimensions");
  s.out_backprop[1] = 4;  // not what SAME with stride 2 gives for 6 rows
  expect_status(convjit_infer_output_shape(&s.desc, shape), CONVJIT_INVALID_ARGUMENT,
                "Conv2DBackpropInput");
  expect_status(convjit_infer_output_shape(nullptr, shape), CONVJIT_INVALID_ARGUMENT, "non-NULL");
  expect_status(convjit_infer_output_shape(&s.desc, nullptr), CONVJIT_INVALID_ARGUMENT, "non-NULL");
}

}  // namespace
