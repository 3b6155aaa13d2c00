#ifdef CONVJIT_HAVE_CUDA

#include "support/cuda_source_runner.hpp"

#include "codegen/cuda/cuda_device_info.hpp"
#include "codegen/cuda/cuda_source.hpp"
#include "codegen/cuda/nvrtc_compiler.hpp"
#include "convjit/convjit.hpp"
#include "runtime/cuda/gpu_executor.hpp"
#include "runtime/cuda/interpret/interpret_executor.hpp"
#include "runtime/thread_pool.hpp"

namespace convjit::testing {
namespace {

codegen::CudaProgram raw_program(const std::string& name, const std::string& body,
                                 const std::vector<RawLaunch>& launches,
                                 const RawBuffers& buffers) {
  codegen::CudaProgram program;
  program.kernel_name = name;
  program.body = body;
  program.workspace_bytes = buffers.workspace_bytes;
  program.x_bytes = static_cast<std::int64_t>(buffers.x.size());
  program.w_bytes = static_cast<std::int64_t>(buffers.w.size());
  program.y_bytes = static_cast<std::int64_t>(buffers.y.size());
  program.output = 'y';
  for (const RawLaunch& l : launches) {
    codegen::CudaLaunch launch;
    launch.symbol = l.symbol;
    launch.grid = l.grid;
    launch.block = l.block;
    program.launches.push_back(launch);
  }
  return program;
}

}  // namespace

Status run_cuda_source(const std::string& name, const std::string& body,
                       const std::vector<RawLaunch>& launches, RawBuffers* buffers,
                       int host_threads) {
  Expected<std::shared_ptr<const codegen::CudaExecutor>> executor =
      runtime::interpret::make_interpret_executor();
  if (!executor) return executor.status();
  const codegen::CudaProgram program = raw_program(name, body, launches, *buffers);
  codegen::Artifacts artifacts;
  Expected<std::shared_ptr<const codegen::CudaModule>> module =
      (*executor)->load(program, nullptr, &artifacts);
  if (!module) return module.status();
  codegen::RunContext context;
  context.parallel_for = runtime::resolve_parallel_for({}, host_threads);
  const OperandPointers operands{buffers->x.data(), buffers->w.data(), buffers->y.data()};
  return (*module)->run(program, operands, context);
}

Status run_cuda_source_on_gpu(const std::string& name, const std::string& body,
                              const std::vector<RawLaunch>& launches, RawBuffers* buffers) {
  Expected<std::shared_ptr<const codegen::CudaExecutor>> executor =
      runtime::cuda::make_gpu_executor(0);
  if (!executor) return executor.status();
  const codegen::CudaProgram program = raw_program(name, body, launches, *buffers);
  Expected<const codegen::NvrtcCompiler*> nvrtc = codegen::NvrtcCompiler::get();
  if (!nvrtc) return nvrtc.status();
  Expected<codegen::CudaBinary> binary =
      (*nvrtc)->compile(codegen::nvrtc_translation_unit(program), name, (*executor)->device_info());
  if (!binary) return binary.status();
  codegen::Artifacts artifacts;
  Expected<std::shared_ptr<const codegen::CudaModule>> module =
      (*executor)->load(program, &*binary, &artifacts);
  if (!module) return module.status();
  try {
    auto device_copy = [](const std::vector<std::uint8_t>& host) {
      DeviceBuffer b("cuda:0", host.size());
      if (!host.empty()) b.copy_from_host(host.data(), host.size());
      return b;
    };
    const DeviceBuffer x = device_copy(buffers->x), w = device_copy(buffers->w);
    const DeviceBuffer y = device_copy(buffers->y);
    const OperandPointers operands{buffers->x.empty() ? nullptr : x.data(),
                                   buffers->w.empty() ? nullptr : w.data(), y.data()};
    CONVJIT_RETURN_IF_ERROR((*module)->run(program, operands, codegen::RunContext{}));
    synchronize("cuda:0");
    y.copy_to_host(buffers->y.data(), buffers->y.size());
  } catch (const Error& e) {
    return Status(StatusCode::kInternal, e.what());
  }
  return Status::ok();
}

Status cuda_source_compiles(const std::string& name, const std::string& body,
                            const std::string& arch) {
  Expected<codegen::CudaDeviceInfo> device = codegen::known_cuda_target(arch);
  if (!device) return device.status();
  Expected<const codegen::NvrtcCompiler*> nvrtc = codegen::NvrtcCompiler::get();
  if (!nvrtc) return nvrtc.status();
  codegen::CudaProgram program;
  program.body = body;
  Expected<codegen::CudaBinary> binary =
      (*nvrtc)->compile(codegen::nvrtc_translation_unit(program), name, *device);
  return binary ? Status::ok() : binary.status();
}

}  // namespace convjit::testing

#endif  // CONVJIT_HAVE_CUDA
