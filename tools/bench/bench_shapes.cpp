#include "tools/bench/bench_shapes.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace convjit::bench {
namespace {

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation,
                      bool same) {
  const std::int64_t k_eff = (k - 1) * dilation + 1;
  return same ? (in + stride - 1) / stride : (in - k_eff + stride) / stride;
}

std::int64_t pad_total(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                       std::int64_t dilation, bool same) {
  if (!same) return 0;
  const std::int64_t k_eff = (k - 1) * dilation + 1;
  return std::max<std::int64_t>(0, (out - 1) * stride + k_eff - in);
}

}  // namespace

std::int64_t BenchShape::out_h() const { return out_size(h, kh, stride, dilation, same_padding); }
std::int64_t BenchShape::out_w() const { return out_size(w, kw, stride, dilation, same_padding); }
std::int64_t BenchShape::pad_before_h() const {
  return pad_total(h, out_h(), kh, stride, dilation, same_padding) / 2;
}
std::int64_t BenchShape::pad_after_h() const {
  return pad_total(h, out_h(), kh, stride, dilation, same_padding) - pad_before_h();
}
std::int64_t BenchShape::pad_before_w() const {
  return pad_total(w, out_w(), kw, stride, dilation, same_padding) / 2;
}
std::int64_t BenchShape::pad_after_w() const {
  return pad_total(w, out_w(), kw, stride, dilation, same_padding) - pad_before_w();
}

double BenchShape::flops() const {
  const double taps = static_cast<double>(kh * kw);
  const double out_pixels = static_cast<double>(n * out_h() * out_w());
  return depthwise ? 2.0 * out_pixels * static_cast<double>(ic * m) * taps
                   : 2.0 * out_pixels * static_cast<double>(m) * taps * static_cast<double>(ic);
}

namespace {

// One whitespace-separated field of a row as a positive integer, strictly: "12abc", "1e3",
// "0" and "-4" are errors naming the line and the column.
std::int64_t positive_field(const std::string& token, const char* column, const std::string& at) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || value < 1) {
    throw std::runtime_error(at + ": " + column + " '" + token + "' is not a positive integer");
  }
  return value;
}

}  // namespace

std::vector<BenchShape> load_shapes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open benchmark shapes file '" + path + "'");
  std::vector<BenchShape> shapes;
  std::set<std::string> names;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string at = path + ":" + std::to_string(line_no);
    std::istringstream row(line);
    std::vector<std::string> fields;
    for (std::string f; row >> f;) fields.push_back(f);
    if (fields.size() != 12) {
      throw std::runtime_error(at + ": expected 12 fields (name kind N H W IC M KH KW stride pad "
                               "dilation), found " + std::to_string(fields.size()));
    }
    BenchShape s;
    s.name = fields[0];
    const std::string& kind = fields[1];
    const std::string& pad = fields[10];
    if (kind != "conv" && kind != "dw") {
      throw std::runtime_error(at + ": kind '" + kind + "' is not conv or dw");
    }
    if (pad != "SAME" && pad != "VALID") {
      throw std::runtime_error(at + ": pad '" + pad + "' is not SAME or VALID");
    }
    s.n = positive_field(fields[2], "N", at);
    s.h = positive_field(fields[3], "H", at);
    s.w = positive_field(fields[4], "W", at);
    s.ic = positive_field(fields[5], "IC", at);
    s.m = positive_field(fields[6], "M", at);
    s.kh = positive_field(fields[7], "KH", at);
    s.kw = positive_field(fields[8], "KW", at);
    s.stride = positive_field(fields[9], "stride", at);
    s.dilation = positive_field(fields[11], "dilation", at);
    s.depthwise = kind == "dw";
    s.same_padding = pad == "SAME";
    if (!names.insert(s.name).second) {
      throw std::runtime_error(at + ": shape name '" + s.name + "' appears twice");
    }
    if (s.out_h() < 1 || s.out_w() < 1) {
      throw std::runtime_error(at + ": the window does not fit the input (no output)");
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<BenchOp> ops_for(const BenchShape& shape) {
  if (shape.depthwise) return {BenchOp::kBackpropData};
  return {BenchOp::kBackpropData, BenchOp::kBackpropFilter};
}

const char* bench_op_name(const BenchShape& shape, BenchOp op) {
  if (shape.depthwise) return op == BenchOp::kBackpropData ? "dw_bwd_data" : "dw_bwd_filter";
  return op == BenchOp::kBackpropData ? "bwd_data" : "bwd_filter";
}

OpDescriptor make_descriptor(const BenchShape& s, BenchOp op, DType dtype) {
  OpDescriptor d;
  d.dtype = dtype;
  d.data_format = DataFormat::kNHWC;
  if (op == BenchOp::kBackpropData) {
    d.op = s.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropInput : OpKind::kConv2DBackpropInput;
  } else {
    d.op = s.depthwise ? OpKind::kDepthwiseConv2dNativeBackpropFilter
                       : OpKind::kConv2DBackpropFilter;
  }
  d.input = {s.n, s.h, s.w, s.ic};
  d.filter = {s.kh, s.kw, s.ic, s.m};  // HWIO, or [KH,KW,C,M] for depthwise
  d.out_backprop = {s.n, s.out_h(), s.out_w(), s.oc()};
  d.strides = {1, s.stride, s.stride, 1};
  d.dilations = {1, s.dilation, s.dilation, 1};
  d.padding = s.same_padding ? Padding::kSame : Padding::kValid;
  return d;
}

}  // namespace convjit::bench
