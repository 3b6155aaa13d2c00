#include "runtime/disk_cache/make_entry.hpp"

#include <fmt/format.h>

#include "frontend/descriptor_text.hpp"

namespace convjit::disk_cache {

std::string shape_summary(const ConvProblem& p) {
  std::string text = fmt::format("N{} {}x{}x{} k{}x{} oc{}", p.n, p.ih, p.iw, p.ic, p.kh, p.kw, p.oc);
  if (p.stride_h != 1 || p.stride_w != 1) text += fmt::format(" s{}x{}", p.stride_h, p.stride_w);
  if (p.dilation_h != 1 || p.dilation_w != 1) text += fmt::format(" d{}x{}", p.dilation_h, p.dilation_w);
  if (p.groups != 1) text += fmt::format(" g{}", p.groups);
  return text;
}

Entry make_entry(const CompiledFacts& facts) {
  Entry entry;
  EntryMeta& meta = entry.meta;
  meta.key = std::string(facts.key);
  meta.descriptor = to_text(*facts.descriptor);
  meta.problem = to_text(*facts.problem);
  meta.op = std::string(op_name(facts.descriptor->op));
  meta.dtype = std::string(dtype_name(facts.problem->dtype));
  meta.layout = std::string(data_format_name(facts.problem->format));
  meta.shape = shape_summary(*facts.problem);
  meta.backend = std::string(facts.backend);
  meta.isa = std::string(facts.isa);
  meta.codegen_version = std::string(facts.codegen_version);
  meta.kernel_name = std::string(facts.kernel_name);
  meta.compile_ms = facts.compile_ms;
  if (facts.artifacts != nullptr) {
    for (const auto& [name, bytes] : *facts.artifacts) entry.artifacts[name] = bytes;
  }
  entry.artifacts[kIrArtifact].assign(facts.ir_text.begin(), facts.ir_text.end());
  if (!facts.plan_text.empty()) {
    entry.artifacts[kPlanArtifact].assign(facts.plan_text.begin(), facts.plan_text.end());
  }
  return entry;
}

}  // namespace convjit::disk_cache
