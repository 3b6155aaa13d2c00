#include "support/test_conformance.hpp"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "frontend/descriptor_text.hpp"

namespace convjit::testing {
namespace {

using Json = nlohmann::json;
using Dims = std::vector<std::int64_t>;

std::string sanitize(std::string_view name) {
  std::string out;
  for (char ch : name) {
    out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  // Collapse runs of '_' and trim them: gtest names read better and stay unique enough.
  std::string collapsed;
  for (char ch : out) {
    if (ch == '_' && (collapsed.empty() || collapsed.back() == '_')) continue;
    collapsed += ch;
  }
  while (!collapsed.empty() && collapsed.back() == '_') collapsed.pop_back();
  return collapsed;
}

// A size vector: numbers, or a description such as "random int32 vector of length 3" that
// TensorFlow's fuzz reports use, turned into such a vector from a seeded generator.
Dims size_vector(const Json& j, std::uint64_t seed) {
  if (j.is_array()) return j.get<Dims>();
  const std::string text = j.get<std::string>();
  std::smatch m;
  std::size_t length = 0;
  if (std::regex_search(text, m, std::regex(R"(length[ -](\d+))"))) {
    length = std::stoul(m[1].str());
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(std::numeric_limits<std::int32_t>::min(),
                                                   std::numeric_limits<std::int32_t>::max());
  Dims v(length);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The part of TensorFlow's error description that names its rule: a quoted message when the
// JSON has one, else a known phrase; empty when TensorFlow only promises a clean error.
std::string error_substring(const std::string& expect_error) {
  std::smatch m;
  if (std::regex_search(expect_error, m, std::regex(R"(InvalidArgumentError:? '([^']+)')"))) {
    return m[1].str();
  }
  if (std::regex_search(expect_error, m, std::regex(R"(matching '([^'|]+))"))) return m[1].str();
  if (expect_error.find("out_backprop must be rank 4") != std::string::npos) {
    return "out_backprop must be 4-dimensional";
  }
  if (std::regex_search(expect_error, m, std::regex(R"(\('([^']+)')"))) return m[1].str();
  return {};
}

std::uint64_t name_seed(std::string_view name) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: a stable per-case seed
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

bool is_forward(OpKind op) {
  return op == OpKind::kConv2D || op == OpKind::kDepthwiseConv2dNative;
}

ConformanceCase parse_case(const Json& j) {
  ConformanceCase c;
  c.tf_name = j.at("name").get<std::string>();
  const std::uint64_t seed = name_seed(c.tf_name);
  OpDescriptor& d = c.desc;
  auto op = parse_op_name(j.at("op").get<std::string>());
  EXPECT_TRUE(op.has_value()) << c.tf_name;
  d.op = op.has_value() ? *op : OpKind::kConv2D;
  auto dtype = parse_dtype(j.at("dtype").get<std::string>());
  EXPECT_TRUE(dtype.has_value()) << c.tf_name;
  d.dtype = dtype.has_value() ? *dtype : DType::kFloat32;
  if (j.contains("data_format")) {
    auto f = parse_data_format(j["data_format"].get<std::string>());
    EXPECT_TRUE(f.has_value()) << c.tf_name;
    if (f.has_value()) d.data_format = *f;
  }
  auto padding = parse_padding(j.at("padding").get<std::string>());
  EXPECT_TRUE(padding.has_value()) << c.tf_name;
  if (padding.has_value()) d.padding = *padding;

  // The op's shape argument: input_sizes for the sizes ops, else the full input shape.
  if (takes_input_sizes(d.op) || !j.contains("input_shape")) {
    d.input = size_vector(j.at("input_sizes"), seed);
  } else {
    d.input = j["input_shape"].get<Dims>();
  }
  d.filter = size_vector(j.at("filter_sizes"), seed + 1);
  if (j.contains("output_sizes")) c.output_sizes = size_vector(j["output_sizes"], seed + 2);
  if (!is_forward(d.op)) d.out_backprop = c.output_sizes;
  d.strides = j.at("strides").get<Dims>();
  if (j.contains("dilations")) d.dilations = j["dilations"].get<Dims>();
  if (j.contains("explicit_paddings")) d.explicit_paddings = j["explicit_paddings"].get<Dims>();

  if (j.contains("input_generation_rule")) c.rule = j["input_generation_rule"].get<std::string>();
  if (j.contains("expected") && !j["expected"].is_null()) {
    c.expected = j["expected"].get<std::vector<double>>();
  }
  if (j.contains("expect_error") && !j["expect_error"].is_null()) {
    c.expect_error = j["expect_error"].get<std::string>();
    c.error_substring = error_substring(*c.expect_error);
  }
  c.test_name = sanitize(c.tf_name);
  return c;
}

// How one operand is filled, read off the rule text.
enum class Fill { kArange, kArangeNhwcTransposed, kScaledFromZero, kOnes, kZeros, kConstant, kRandom };

Fill fill_for(const ConformanceCase& c, std::string_view operand) {
  const std::string& r = c.rule;
  const bool activation = operand != "filter";
  if (r.rfind("ConstructAndTestGradient", 0) == 0) {
    // The checker's probes of out_backprop are arbitrary; input and filter follow the rule.
    return operand == "out_backprop" ? Fill::kRandom : Fill::kScaledFromZero;
  }
  if (r.find("TRANSPOSED to NCHW") != std::string::npos) {
    return activation ? Fill::kArangeNhwcTransposed : Fill::kArange;
  }
  if (r.find("constant 0.159749106") != std::string::npos) {
    return operand == "filter" ? Fill::kConstant : Fill::kZeros;
  }
  if (r.find("np.ones") != std::string::npos) return Fill::kOnes;
  if (r.rfind("TF: _VerifyValues", 0) == 0 || r.find("random") != std::string::npos) {
    return Fill::kRandom;
  }
  if (r.find("1..") != std::string::npos || r.find("range(1, n+1)") != std::string::npos) {
    return Fill::kArange;
  }
  return Fill::kRandom;
}

TestTensor make_operand(const ConformanceCase& c, std::string_view operand, const Dims& shape,
                        std::uint64_t seed) {
  const DType dtype = c.desc.dtype;
  switch (fill_for(c, operand)) {
    case Fill::kRandom: return random_tensor(dtype, shape, seed);
    case Fill::kArange: {
      TestTensor t(dtype, shape);
      for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, static_cast<double>(i + 1));
      return t;
    }
    case Fill::kScaledFromZero: {
      TestTensor t(dtype, shape);
      const double n = static_cast<double>(t.elements());
      for (std::int64_t i = 0; i < t.elements(); ++i) t.set(i, static_cast<double>(i) / n);
      return t;
    }
    case Fill::kOnes: {
      TestTensor t(dtype, shape);
      t.fill(1.0);
      return t;
    }
    case Fill::kZeros: return TestTensor(dtype, shape);
    case Fill::kConstant: {
      TestTensor t(dtype, shape);
      t.fill(0.159749106);
      return t;
    }
    case Fill::kArangeNhwcTransposed: {
      // np.arange(1, n+1).reshape(NHWC) then transposed to NCHW: element (n,c,h,w) holds the
      // NHWC row-major index of (n,h,w,c) plus one.
      TestTensor t(dtype, shape);
      if (shape.size() != 4) return t;
      const std::int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t ch = 0; ch < C; ++ch)
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t w = 0; w < W; ++w) {
              const std::int64_t nchw = ((n * C + ch) * H + h) * W + w;
              const std::int64_t nhwc = ((n * H + h) * W + w) * C + ch;
              t.set(nchw, static_cast<double>(nhwc + 1));
            }
      return t;
    }
  }
  return TestTensor(dtype, shape);
}

std::pair<std::string_view, std::string_view> operand_names(OpKind op) {
  if (is_forward(op)) return {"input", "filter"};
  if (takes_filter_sizes(op)) return {"input", "out_backprop"};
  return {"filter", "out_backprop"};
}

}  // namespace

std::string conformance_path() {
  // $CONVJIT_SHARED_DIR overrides the checkout's ../shared (a build carried to another machine).
  const char* shared = std::getenv("CONVJIT_SHARED_DIR");
  return std::string(shared != nullptr && *shared != '\0' ? shared : CONVJIT_SHARED_DIR) +
         "/conformance/tf_cases.json";
}

std::vector<ConformanceCase> load_conformance_cases(const std::string& path) {
  std::vector<ConformanceCase> cases;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return cases;
  }
  const Json all = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!all.is_array()) {
    ADD_FAILURE() << path << " is not a JSON list";
    return cases;
  }
  std::set<std::string> names;
  auto add = [&](ConformanceCase c) {
    std::string base = c.test_name;
    for (int i = 2; !names.insert(c.test_name).second; ++i) c.test_name = fmt::format("{}_{}", base, i);
    cases.push_back(std::move(c));
  };
  for (const Json& j : all) {
    ConformanceCase c = parse_case(j);
    add(c);
    // Hard-coded values hold for every float dtype TensorFlow checks them in.
    if (c.expected && j.contains("dtypes_tested_by_tf") && j["dtypes_tested_by_tf"].is_array()) {
      for (const Json& name : j["dtypes_tested_by_tf"]) {
        auto dtype = parse_dtype(name.get<std::string>());
        if (!dtype.has_value() || *dtype == c.desc.dtype) continue;
        ConformanceCase variant = c;
        variant.desc.dtype = *dtype;
        variant.test_name = fmt::format("{}_{}", c.test_name, dtype_name(*dtype));
        add(std::move(variant));
      }
    }
  }
  return cases;
}

CaseOperands make_operands(const ConformanceCase& c, const std::vector<std::int64_t>& a_shape,
                           const std::vector<std::int64_t>& b_shape) {
  const auto [a_name, b_name] = operand_names(c.desc.op);
  const std::uint64_t seed = name_seed(c.tf_name);
  return {make_operand(c, a_name, a_shape, seed), make_operand(c, b_name, b_shape, seed + 7)};
}

Tolerance expected_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64: return {1e-9, 1e-12};
    case DType::kFloat32: return {1e-5, 1e-5};
    case DType::kHalf: return {1e-3, 1e-3};
    case DType::kBFloat16: return {1e-2, 8e-3};
  }
  return {};
}

}  // namespace convjit::testing
