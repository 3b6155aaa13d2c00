#include "runtime/cuda/interpret/interpret_executor.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "frontend/hash.hpp"
#include "runtime/cuda/interpret/block_runner.hpp"
#include "runtime/cuda/interpret/host_object.hpp"

namespace convjit::runtime::interpret {

std::string_view host_prelude_text();

namespace {

using codegen::Artifacts;
using codegen::CudaBinary;
using codegen::CudaDeviceInfo;
using codegen::CudaLaunch;
using codegen::CudaModule;
using codegen::CudaProgram;

class InterpretModule final : public CudaModule {
 public:
  InterpretModule(std::shared_ptr<const HostObject> object, std::vector<KernelEntry> entries)
      : object_(std::move(object)), entries_(std::move(entries)) {}

  Status run(const CudaProgram& program, const OperandPointers& operands,
             const codegen::RunContext& context) const override {
    // The workspace: the caller's (host memory here), checked for size, or one per run filled
    // with NaN bytes so a kernel reading what it never wrote shows up in the result.
    std::vector<std::byte> own_workspace;
    void* workspace = nullptr;
    if (program.workspace_bytes > 0) {
      if (context.workspace != nullptr) {
        if (context.workspace_bytes < program.workspace_bytes) {
          return invalid_argument(fmt::format(
              "the workspace passed ({} bytes) is smaller than the {} bytes kernel {} needs "
              "(Kernel::workspace_bytes)",
              context.workspace_bytes, program.workspace_bytes, program.kernel_name));
        }
        workspace = context.workspace;
      } else {
        own_workspace.assign(program.workspace_bytes, std::byte{0xff});
        workspace = own_workspace.data();
      }
    }
    LaunchInfo info;
    info.launch_count = static_cast<int>(program.launches.size());
    info.args = {operands.x, operands.w, operands.y, workspace};
    auto buffer = [&](void* p, std::int64_t bytes, const char* name, char role) {
      return GlobalBuffer{static_cast<const std::byte*>(p), static_cast<std::size_t>(bytes), name,
                          program.output == role};
    };
    info.buffers = {buffer(operands.x, program.x_bytes, "x", 'x'),
                    buffer(operands.w, program.w_bytes, "w", 'w'),
                    buffer(operands.y, program.y_bytes, "y", 'y')};
    if (workspace != nullptr) {
      info.buffers.push_back(
          {static_cast<const std::byte*>(workspace), program.workspace_bytes, "workspace", true});
    }
    const ParallelFor parallel =
        context.parallel_for ? context.parallel_for : ParallelFor(serial_for);
    for (std::size_t i = 0; i < program.launches.size(); ++i) {
      const CudaLaunch& launch = program.launches[i];
      info.kernel = launch.symbol;
      info.launch_index = static_cast<int>(i);
      info.entry = entries_[i];
      info.grid = {launch.grid[0], launch.grid[1], launch.grid[2]};
      info.block = {launch.block[0], launch.block[1], launch.block[2]};
      const std::int64_t blocks =
          static_cast<std::int64_t>(launch.grid[0]) * launch.grid[1] * launch.grid[2];
      ErrorSink errors;
      // Blocks are independent (as on a GPU): the runtime's threads take chunks of them.
      parallel(blocks, [&](std::int64_t begin, std::int64_t end) {
        BlockRunner& runner = BlockRunner::for_this_thread();
        for (std::int64_t b = begin; b < end && !errors.failed(); ++b) {
          runner.run_block(info, b, &errors);
        }
      });
      if (errors.failed()) return internal_error(errors.summary());
    }
    return Status::ok();
  }

  std::size_t resident_bytes() const override {
    return object_ != nullptr ? object_->bytes().size() : 0;
  }

 private:
  std::shared_ptr<const HostObject> object_;
  std::vector<KernelEntry> entries_;
};

Expected<std::shared_ptr<const CudaModule>> module_for(
    const CudaProgram& program, Expected<std::shared_ptr<const HostObject>> object) {
  if (!object) return object.status();
  std::vector<KernelEntry> entries;
  for (const CudaLaunch& launch : program.launches) {
    Expected<KernelEntry> entry = (*object)->kernel(launch.symbol);
    if (!entry) return entry.status();
    entries.push_back(*entry);
  }
  return std::shared_ptr<const CudaModule>(
      std::make_shared<InterpretModule>(std::move(object).value(), std::move(entries)));
}

class InterpretExecutor final : public codegen::CudaExecutor {
 public:
  InterpretExecutor(CudaDeviceInfo info, std::string compiler_key)
      : info_(std::move(info)),
        target_(fmt::format(
            "interpret-{}/{}", info_.arch_name(),
            hash128(compiler_key + "\n" + std::string(host_prelude_text())).hex().substr(0, 16))) {}

  const std::string& device() const override { return device_; }
  codegen::MemorySpace memory_space() const override { return codegen::MemorySpace::kHost; }
  const CudaDeviceInfo& device_info() const override { return info_; }
  std::string target_name() const override { return target_; }
  bool needs_cubin() const override { return false; }

  Expected<std::shared_ptr<const CudaModule>> load(const CudaProgram& program, const CudaBinary*,
                                                   Artifacts* artifacts) const override {
    if (program.launches.empty()) {
      return std::shared_ptr<const CudaModule>(
          std::make_shared<InterpretModule>(nullptr, std::vector<KernelEntry>{}));
    }
    Expected<std::shared_ptr<const HostObject>> object =
        HostObject::build(program.body, program.kernel_name);
    if (object) (*artifacts)[kHostObjectArtifact] = (*object)->bytes();
    return module_for(program, std::move(object));
  }

  Expected<std::shared_ptr<const CudaModule>> load_stored(
      const CudaProgram& program, const Artifacts& artifacts) const override {
    if (program.launches.empty()) {
      return std::shared_ptr<const CudaModule>(
          std::make_shared<InterpretModule>(nullptr, std::vector<KernelEntry>{}));
    }
    const auto it = artifacts.find(kHostObjectArtifact);
    if (it == artifacts.end()) {
      // An entry without its object (written by an older convjit): build it again.
      return module_for(program, HostObject::build(program.body, program.kernel_name));
    }
    return module_for(program, HostObject::load(it->second));
  }

 private:
  CudaDeviceInfo info_;
  std::string device_ = "cuda-interpret";
  std::string target_;
};

}  // namespace

Expected<std::shared_ptr<const codegen::CudaExecutor>> make_interpret_executor() {
  Expected<const HostCompiler*> compiler = host_compiler();
  if (!compiler) return compiler.status();
  Expected<CudaDeviceInfo> info = codegen::known_cuda_target("sm_80");
  if (!info) return info.status();
  info->name = "convjit interpreter (an sm_80 model)";
  return std::shared_ptr<const codegen::CudaExecutor>(
      std::make_shared<InterpretExecutor>(*info, (*compiler)->key()));
}

}  // namespace convjit::runtime::interpret
