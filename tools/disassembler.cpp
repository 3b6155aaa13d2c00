#include "tools/disassembler.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace convjit::cli {
namespace {

// LLVM's C disassembler API (llvm-c/Disassembler.h), stable across LLVM versions. It is looked
// up at run time so that neither the build nor the installed tool needs LLVM: only `cache show`
// uses it, and only when a libLLVM is installed.
using DisasmContext = void*;
using CreateDisasmFn = DisasmContext (*)(const char* triple, void* info, int tag_type,
                                         void* get_op_info, void* symbol_lookup);
using SetOptionsFn = int (*)(DisasmContext, std::uint64_t options);
using DisasmInstructionFn = std::size_t (*)(DisasmContext, std::uint8_t* bytes, std::uint64_t size,
                                            std::uint64_t pc, char* out, std::size_t out_size);
using DisposeFn = void (*)(DisasmContext);
using InitFn = void (*)();

constexpr std::uint64_t kOptionAsmPrinterVariant = 4;  // Intel syntax on x86
constexpr std::uint64_t kOptionPrintImmHex = 2;

struct Llvm {
  CreateDisasmFn create = nullptr;
  SetOptionsFn set_options = nullptr;
  DisasmInstructionFn instruction = nullptr;
  DisposeFn dispose = nullptr;
  std::string library;  // which file was opened
};

// The newest LLVM first; any release with the C API will do.
constexpr std::array kLibraryNames{"libLLVM.so.22.1",
                                   "libLLVM-22.so",
                                   "libLLVM.so.22",
                                   "libLLVM.so.21.1",
                                   "libLLVM-21.so",
                                   "libLLVM.so.20.1",
                                   "libLLVM-20.so",
                                   "libLLVM-19.so",
                                   "libLLVM-18.so",
                                   "libLLVM-17.so",
                                   "libLLVM-16.so",
                                   "libLLVM-15.so",
                                   "libLLVM-15.so.1",
                                   "libLLVM-14.so",
                                   "libLLVM-14.so.1",
                                   "libLLVM.so",
                                   "/usr/lib/llvm-22/lib/libLLVM.so"};

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(handle, name));
}

// Opens LLVM once per process; nullptr when no usable library is installed.
const Llvm* load_llvm() {
  static Llvm llvm;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    // $CONVJIT_LLVM_LIBRARY names the one library to try (a path or a soname).
    std::vector<const char*> names(kLibraryNames.begin(), kLibraryNames.end());
    if (const char* chosen = std::getenv("CONVJIT_LLVM_LIBRARY"); chosen != nullptr && *chosen) {
      names = {chosen};
    }
    for (const char* name : names) {
      void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) continue;
      auto info = symbol<InitFn>(handle, "LLVMInitializeX86TargetInfo");
      auto mc = symbol<InitFn>(handle, "LLVMInitializeX86TargetMC");
      auto disassembler = symbol<InitFn>(handle, "LLVMInitializeX86Disassembler");
      llvm.create = symbol<CreateDisasmFn>(handle, "LLVMCreateDisasm");
      llvm.set_options = symbol<SetOptionsFn>(handle, "LLVMSetDisasmOptions");
      llvm.instruction = symbol<DisasmInstructionFn>(handle, "LLVMDisasmInstruction");
      llvm.dispose = symbol<DisposeFn>(handle, "LLVMDisasmDispose");
      if (!info || !mc || !disassembler || !llvm.create || !llvm.set_options || !llvm.instruction ||
          !llvm.dispose) {
        ::dlclose(handle);
        continue;
      }
      // Only the X86 parts of LLVM are initialised: the tool never needs another target.
      info();
      mc();
      disassembler();
      llvm.library = name;
      loaded = true;  // the handle stays open for the life of the process
      return;
    }
  });
  return loaded ? &llvm : nullptr;
}

}  // namespace

bool disassembler_available() { return load_llvm() != nullptr; }

std::string disassemble_x86_64(std::span<const std::uint8_t> code) {
  const Llvm* llvm = load_llvm();
  if (llvm == nullptr) {
    return fmt::format(
        "  disassembly unavailable (LLVM not found): {} bytes of x86-64 code. "
        "Install libLLVM (e.g. llvm-22), or dump them with `convjit cache show KEY "
        "--code-file FILE` and run objdump -D -b binary -mi386:x86-64 FILE\n",
        code.size());
  }
  DisasmContext context = llvm->create("x86_64-unknown-linux-gnu", nullptr, 0, nullptr, nullptr);
  if (context == nullptr) return "  (this LLVM has no x86-64 disassembler)\n";
  llvm->set_options(context, kOptionAsmPrinterVariant | kOptionPrintImmHex);
  std::string listing;
  std::size_t offset = 0;
  char text[256];
  std::vector<std::uint8_t> bytes(code.begin(), code.end());  // the C API wants non-const
  while (offset < bytes.size()) {
    std::size_t size = llvm->instruction(context, bytes.data() + offset, bytes.size() - offset,
                                         offset, text, sizeof text);
    std::string hex;
    if (size == 0) {
      listing += fmt::format("  0x{:04x}:  {:02x}{:27}.byte 0x{:02x}\n", offset, bytes[offset], "",
                             bytes[offset]);
      offset += 1;
      continue;
    }
    for (std::size_t i = 0; i < size && i < 10; ++i)
      hex += fmt::format("{:02x} ", bytes[offset + i]);
    std::string instr(text);
    std::replace(instr.begin(), instr.end(), '\t', ' ');
    instr.erase(0, instr.find_first_not_of(' '));
    listing += fmt::format("  0x{:04x}:  {:<30}{}\n", offset, hex, instr);
    offset += size;
  }
  llvm->dispose(context);
  return listing;
}

}  // namespace convjit::cli
