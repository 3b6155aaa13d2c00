#include "tools/bench/gpu/gpu_layouts.hpp"

#include <cstring>

namespace convjit::bench::gpu {

std::int64_t extra_rows(const BenchShape& s) { return s.pad_after_h() - s.pad_before_h(); }
std::int64_t extra_cols(const BenchShape& s) { return s.pad_after_w() - s.pad_before_w(); }

CudnnProblem cudnn_problem(const BenchShape& s, bool backprop_data) {
  CudnnProblem p;
  p.n = static_cast<int>(s.n);
  p.h = static_cast<int>(s.h + extra_rows(s));
  p.w = static_cast<int>(s.w + extra_cols(s));
  p.c = static_cast<int>(s.ic);
  p.k = static_cast<int>(s.oc());
  p.r = static_cast<int>(s.kh);
  p.s = static_cast<int>(s.kw);
  p.groups = static_cast<int>(s.groups());
  p.pad_h = static_cast<int>(s.pad_before_h());
  p.pad_w = static_cast<int>(s.pad_before_w());
  p.stride = static_cast<int>(s.stride);
  p.dilation = static_cast<int>(s.dilation);
  p.out_h = static_cast<int>(s.out_h());
  p.out_w = static_cast<int>(s.out_w());
  p.backprop_data = backprop_data;
  return p;
}

namespace {

// Element (kh, kw, input channel c, output channel o of the op) of the HWIO filter and of the
// KRSC one, in elements.
struct FilterIndex {
  const BenchShape& s;
  std::int64_t hwio(std::int64_t kh, std::int64_t kw, std::int64_t c, std::int64_t j) const {
    return ((kh * s.kw + kw) * s.ic + c) * s.m + j;
  }
  // Depthwise: output channel c*M + j of group c has one input channel.
  std::int64_t krsc(std::int64_t kh, std::int64_t kw, std::int64_t c, std::int64_t j) const {
    if (s.depthwise) return ((c * s.m + j) * s.kh + kh) * s.kw + kw;
    return ((j * s.kh + kh) * s.kw + kw) * s.ic + c;
  }
};

template <typename F>
void for_each_tap(const BenchShape& s, F&& f) {
  for (std::int64_t kh = 0; kh < s.kh; ++kh)
    for (std::int64_t kw = 0; kw < s.kw; ++kw)
      for (std::int64_t c = 0; c < s.ic; ++c)
        for (std::int64_t j = 0; j < s.m; ++j) f(kh, kw, c, j);
}

}  // namespace

std::vector<std::byte> hwio_to_krsc(const BenchShape& s, const void* hwio, int element_bytes) {
  const auto e = static_cast<std::size_t>(element_bytes);
  std::vector<std::byte> out(static_cast<std::size_t>(s.kh * s.kw * s.ic * s.m) * e);
  const auto* in = static_cast<const std::byte*>(hwio);
  const FilterIndex ix{s};
  for_each_tap(s, [&](std::int64_t kh, std::int64_t kw, std::int64_t c, std::int64_t j) {
    std::memcpy(out.data() + static_cast<std::size_t>(ix.krsc(kh, kw, c, j)) * e,
                in + static_cast<std::size_t>(ix.hwio(kh, kw, c, j)) * e, e);
  });
  return out;
}

void krsc_to_hwio(const BenchShape& s, const void* krsc, void* hwio, int element_bytes) {
  const auto e = static_cast<std::size_t>(element_bytes);
  const auto* in = static_cast<const std::byte*>(krsc);
  auto* out = static_cast<std::byte*>(hwio);
  const FilterIndex ix{s};
  for_each_tap(s, [&](std::int64_t kh, std::int64_t kw, std::int64_t c, std::int64_t j) {
    std::memcpy(out + static_cast<std::size_t>(ix.hwio(kh, kw, c, j)) * e,
                in + static_cast<std::size_t>(ix.krsc(kh, kw, c, j)) * e, e);
  });
}

std::vector<std::byte> pad_x(const BenchShape& s, const void* x, int element_bytes) {
  const auto e = static_cast<std::size_t>(element_bytes);
  const std::int64_t ph = s.h + extra_rows(s), pw = s.w + extra_cols(s);
  const auto row = static_cast<std::size_t>(s.w * s.ic) * e;
  std::vector<std::byte> out(static_cast<std::size_t>(s.n * ph * pw * s.ic) * e);  // zeros
  const auto* in = static_cast<const std::byte*>(x);
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t h = 0; h < s.h; ++h) {
      std::memcpy(out.data() + static_cast<std::size_t>((n * ph + h) * pw * s.ic) * e,
                  in + static_cast<std::size_t>((n * s.h + h) * s.w * s.ic) * e, row);
    }
  return out;
}

void crop_x(const BenchShape& s, const void* padded, void* x, int element_bytes) {
  const auto e = static_cast<std::size_t>(element_bytes);
  const std::int64_t ph = s.h + extra_rows(s), pw = s.w + extra_cols(s);
  const auto row = static_cast<std::size_t>(s.w * s.ic) * e;
  const auto* in = static_cast<const std::byte*>(padded);
  auto* out = static_cast<std::byte*>(x);
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t h = 0; h < s.h; ++h) {
      std::memcpy(out + static_cast<std::size_t>((n * s.h + h) * s.w * s.ic) * e,
                  in + static_cast<std::size_t>((n * ph + h) * pw * s.ic) * e, row);
    }
}

}  // namespace convjit::bench::gpu
