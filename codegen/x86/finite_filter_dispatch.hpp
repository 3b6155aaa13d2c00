// Kernels whose schedule multiplies zero padding by the filter (zero-bordered dy copies: the
// W-vector and NCHW depthwise input gradients) are exact only while the filter is finite:
// 0 x Inf is NaN, where TensorFlow's formula has no product at all. Such a kernel keeps an exact
// twin scheduled without the padding, and each run scans the filter (small for these shapes)
// to pick one.
#pragma once

#include <memory>

#include "codegen/backend.hpp"
#include <cstdint>
#include <string_view>

#include "convjit/types.hpp"

namespace convjit::codegen::x86 {

/// Artifact name suffix of the exact twin's code and layout ("code.exact", "load.exact").
inline constexpr const char* kExactTwinSuffix = ".exact";

/// The artifact that marks stored code as such a pair: the filter's dtype and element count.
inline constexpr const char* kDispatchArtifact = "dispatch";

/// `fast`, falling back to `exact` on runs whose filter (`filter_elements` values of `dtype`)
/// holds an Inf or a NaN. Named as `fast`; its artifacts are fast's, the twin's (suffixed) and
/// the dispatch record.
std::unique_ptr<CompiledCode> finite_filter_dispatch(DType dtype, std::int64_t filter_elements,
                                                     std::unique_ptr<CompiledCode> fast,
                                                     std::unique_ptr<CompiledCode> exact);

/// Reads a dispatch record back: false when `text` is not one.
bool parse_dispatch(std::string_view text, DType* dtype, std::int64_t* filter_elements);

/// Whether every element of the `count` values of `dtype` at `data` is finite.
bool all_finite(DType dtype, const void* data, std::int64_t count);

}  // namespace convjit::codegen::x86
