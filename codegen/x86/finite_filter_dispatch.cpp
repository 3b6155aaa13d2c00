#include "codegen/x86/finite_filter_dispatch.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace convjit::codegen::x86 {
namespace {

// All exponent bits set: Inf or NaN, in any IEEE format.
template <typename Bits>
bool finite_bits(const void* data, std::int64_t count, Bits exponent_mask) {
  const auto* p = static_cast<const unsigned char*>(data);
  Bits any = 0;
  // Branch-free over the whole filter (a few thousand elements): the compiler vectorizes it.
  for (std::int64_t i = 0; i < count; ++i) {
    Bits v;
    std::memcpy(&v, p + i * static_cast<std::int64_t>(sizeof(Bits)), sizeof(Bits));
    any |= static_cast<Bits>((v & exponent_mask) == exponent_mask);
  }
  return any == 0;
}

class FiniteFilterDispatch final : public CompiledCode {
 public:
  FiniteFilterDispatch(DType dtype, std::int64_t filter_elements,
                       std::unique_ptr<CompiledCode> fast, std::unique_ptr<CompiledCode> exact)
      : dtype_(dtype),
        filter_elements_(filter_elements),
        fast_(std::move(fast)),
        exact_(std::move(exact)) {}

  Status run(const OperandPointers& operands, const RunContext& context) const override {
    const bool finite = all_finite(dtype_, operands.w, filter_elements_);
    return (finite ? fast_ : exact_)->run(operands, context);
  }
  const std::string& name() const override { return fast_->name(); }
  std::size_t scratch_bytes() const override {
    return std::max(fast_->scratch_bytes(), exact_->scratch_bytes());
  }
  std::span<const std::uint8_t> code_bytes() const override { return fast_->code_bytes(); }
  std::size_t resident_bytes() const override {
    return fast_->resident_bytes() + exact_->resident_bytes();
  }
  void release_idle_memory() const override {
    fast_->release_idle_memory();
    exact_->release_idle_memory();
  }
  Artifacts artifacts() const override {
    Artifacts out = fast_->artifacts();
    for (auto& [name, bytes] : exact_->artifacts()) out[name + kExactTwinSuffix] = std::move(bytes);
    const std::string record =
        std::to_string(static_cast<int>(dtype_)) + " " + std::to_string(filter_elements_);
    out[kDispatchArtifact].assign(record.begin(), record.end());
    return out;
  }

 private:
  DType dtype_;
  std::int64_t filter_elements_;
  std::unique_ptr<CompiledCode> fast_;
  std::unique_ptr<CompiledCode> exact_;
};

}  // namespace

bool all_finite(DType dtype, const void* data, std::int64_t count) {
  if (count <= 0) return true;
  switch (dtype) {
    case DType::kHalf: return finite_bits<std::uint16_t>(data, count, 0x7c00u);
    case DType::kBFloat16: return finite_bits<std::uint16_t>(data, count, 0x7f80u);
    case DType::kFloat32: return finite_bits<std::uint32_t>(data, count, 0x7f800000u);
    case DType::kFloat64:
      return finite_bits<std::uint64_t>(data, count, 0x7ff0000000000000ull);
  }
  return false;
}

std::unique_ptr<CompiledCode> finite_filter_dispatch(DType dtype, std::int64_t filter_elements,
                                                     std::unique_ptr<CompiledCode> fast,
                                                     std::unique_ptr<CompiledCode> exact) {
  return std::make_unique<FiniteFilterDispatch>(dtype, filter_elements, std::move(fast),
                                                std::move(exact));
}

bool parse_dispatch(std::string_view text, DType* dtype, std::int64_t* filter_elements) {
  int d = -1;
  long long count = -1;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%d %lld", &d, &count) != 2) return false;
  if (d < static_cast<int>(DType::kHalf) || d > static_cast<int>(DType::kFloat64) || count < 0) {
    return false;
  }
  *dtype = static_cast<DType>(d);
  *filter_elements = count;
  return true;
}

}  // namespace convjit::codegen::x86
