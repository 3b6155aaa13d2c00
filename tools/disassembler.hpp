// x86-64 disassembly of generated code through LLVM's MC disassembler, for `convjit cache show`.
// LLVM is opened at run time (dlopen); without it the tool says so instead of printing
// instructions.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace convjit::cli {

/// True when an LLVM shared library with the C disassembler API could be opened.
bool disassembler_available();

/// One line per instruction, Intel syntax: "  0x0040:  c5 fc 28 c1   vmovaps ymm0, ymm1".
/// Undecodable bytes are shown as ".byte"; without LLVM, a one-line note.
std::string disassemble_x86_64(std::span<const std::uint8_t> code);

}  // namespace convjit::cli
