// Functions, loops and address arithmetic of the x86 emitter. Loops outside a Tile keep their
// variables in stack slots: they run rarely compared to a tile's reduction, and slots keep
// every nest shape compilable whatever its depth.
#include "codegen/x86/emitter.hpp"

namespace convjit::codegen::x86 {

using namespace Xbyak;  // NOLINT: the mnemonics read as assembly

namespace {
constexpr std::int64_t kBounceBytes = 64;
constexpr int kSavedRegisterBytes = 40;  // rbx, r12..r15 pushed below rbp
}  // namespace

Emitter::Emitter(const ir::LoopNest& nest, const cpu::CpuInfo& target, std::size_t max_bytes)
    : Xbyak::CodeGenerator(max_bytes, Xbyak::DontSetProtectRWE),
      nest_(nest),
      target_(target),
      avx512_(target.isa == cpu::Isa::kAvx512) {
  const auto vars = static_cast<std::int64_t>(nest.var_names.size());
  end_slot_ = kBounceBytes + 8 * vars;
  frame_bytes_ = (end_slot_ + 8 + 63) / 64 * 64;
  if (target.has_amx_bf16) {
    constexpr std::int64_t kConfigBytes = 64, kAccumulatorBytes = 4 * 16 * 64;
    amx_config_offset_ = frame_bytes_;
    amx_config_id_offset_ = amx_config_offset_ + kConfigBytes;
    amx_accumulator_offset_ = amx_config_id_offset_ + 64;
    frame_bytes_ = amx_accumulator_offset_ + kAccumulatorBytes;
  }
  var_reg_.assign(nest.var_names.size(), -1);
  for (int i = 0; i < kVectorRegisters; ++i) {
    vregs_[static_cast<std::size_t>(i)] =
        avx512_ ? Xbyak::Xmm(Xbyak::Zmm(i)) : Xbyak::Xmm(Xbyak::Ymm(i));
    hregs_[static_cast<std::size_t>(i)] = avx512_ ? Xbyak::Xmm(Xbyak::Ymm(i)) : Xbyak::Xmm(i);
  }
}

std::vector<FunctionEntry> Emitter::emit_all() {
  std::vector<FunctionEntry> entries;
  for (const ir::Stmt& s : nest_.body) {
    FunctionEntry e;
    e.offset = getSize();
    emit_function(s, &e);
    entries.push_back(e);
  }
  emit_constants();
  return entries;
}

Address Emitter::slot(ir::VarId v) const {
  return qword[rsp + static_cast<int>(kBounceBytes + 8 * static_cast<std::int64_t>(v))];
}

void Emitter::add_imm(const Reg64& reg, std::int64_t value) {
  if (value == 0) return;
  if (fits_int32(value)) {
    add(reg, static_cast<std::uint32_t>(value));
  } else {
    mov(rcx, value);
    add(reg, rcx);
  }
}

void Emitter::mov_imm(const Address& dst, std::int64_t value) {
  if (fits_int32(value)) {
    mov(dst, static_cast<std::uint64_t>(value));
  } else {
    mov(rax, value);
    mov(dst, rax);
  }
}

void Emitter::emit_affine(const Reg64& dst, const ir::Affine& e, std::int64_t scale,
                          bool accumulate) {
  const std::int64_t c = e.constant * scale;
  if (!accumulate) {
    mov(dst, static_cast<std::uint64_t>(c));
  } else {
    add_imm(dst, c);
  }
  for (const ir::Term& t : e.terms) {
    const std::int64_t k = t.coef * scale;
    const int r = var_reg_[static_cast<std::size_t>(t.var)];
    if (r >= 0) {
      const Reg64 reg(r);
      if (k == 1) {
        add(dst, reg);
        continue;
      }
      if (fits_int32(k)) {
        imul(rax, reg, static_cast<int>(k));
      } else {
        mov(rax, k);
        imul(rax, reg);
      }
    } else {
      const Address s = slot(t.var);
      if (k == 1) {
        add(dst, s);
        continue;
      }
      if (fits_int32(k)) {
        imul(rax, s, static_cast<int>(k));
      } else {
        mov(rax, k);
        imul(rax, s);
      }
    }
    add(dst, rax);
  }
}

void Emitter::emit_base_pointer(const Reg64& dst, const AccessInfo& info,
                                const std::vector<ir::VarId>& zeroed, std::int64_t extra_elems) {
  ir::Affine rest;
  rest.constant = info.offset.constant + extra_elems;
  for (const ir::Term& t : info.offset.terms) {
    bool skip = false;
    for (ir::VarId z : zeroed) skip = skip || z == t.var;
    if (!skip) rest.terms.push_back(t);
  }
  mov(dst, qword[r15 + 8 * info.buffer]);
  emit_affine(dst, rest, info.elem_bytes, /*accumulate=*/true);
}

void Emitter::emit_function(const ir::Stmt& stmt, FunctionEntry* entry) {
  k1_count_ = -1;
  streamed_ = false;
  push(rbp);
  mov(rbp, rsp);
  push(rbx);
  push(r12);
  push(r13);
  push(r14);
  push(r15);
  and_(rsp, -64);
  sub(rsp, static_cast<std::uint32_t>(frame_bytes_));
  mov(r15, rdi);
  // Lanes past a tail are read from the bounce buffer; zeroing it once keeps them finite.
  vxorps(xmm0, xmm0, xmm0);
  vmovups(yword[rsp], ymm0);
  vmovups(yword[rsp + 32], ymm0);
  amx_used_ = false;
  if (target_.has_amx_bf16) mov(dword[rsp + static_cast<int>(amx_config_id_offset_)], 0);

  const auto* loop = std::get_if<ir::Loop>(&stmt.node);
  if (loop != nullptr && loop->kind == ir::LoopKind::kParallel) {
    entry->parallel = true;
    entry->trip = loop->trip_count();
    // var = begin + index * step over the caller's [begin, end) slice of indices.
    Label body, done;
    imul(rax, rsi, static_cast<int>(loop->step));
    add_imm(rax, loop->begin);
    mov(slot(loop->var), rax);
    imul(rax, rdx, static_cast<int>(loop->step));
    add_imm(rax, loop->begin);
    mov(qword[rsp + static_cast<int>(end_slot_)], rax);
    cmp(slot(loop->var), rax);
    jge(done, T_NEAR);
    L(body);
    k1_count_ = -1;
    for (const ir::Stmt& s : loop->body) emit_stmt(s);
    add(slot(loop->var), static_cast<std::uint32_t>(loop->step));
    mov(rax, qword[rsp + static_cast<int>(end_slot_)]);
    cmp(slot(loop->var), rax);
    jl(body, T_NEAR);
    L(done);
  } else {
    entry->parallel = false;
    entry->trip = 1;
    emit_stmt(stmt);
  }

  if (streamed_) sfence();
  if (amx_used_) tilerelease();
  vzeroupper();
  lea(rsp, ptr[rbp - kSavedRegisterBytes]);
  pop(r15);
  pop(r14);
  pop(r13);
  pop(r12);
  pop(rbx);
  pop(rbp);
  ret();
}

void Emitter::emit_stmt(const ir::Stmt& stmt) {
  if (const auto* loop = std::get_if<ir::Loop>(&stmt.node)) {
    if (!try_emit_vector_store_loop(*loop) && !try_emit_repeat_store_loop(*loop) &&
        !try_emit_interleave_store_loop(*loop) && !try_emit_transpose_loop(*loop)) {
      emit_loop(*loop);
    }
  } else if (const auto* tile = std::get_if<ir::Tile>(&stmt.node)) {
    emit_tile(*tile);
  } else {
    emit_scalar_store(std::get<ir::Store>(stmt.node));
  }
}

void Emitter::emit_loop(const ir::Loop& loop) {
  // Nested parallel, unrolled and vectorized loops run serially here: their iterations are
  // independent, so any order is correct, and the tile and store emitters do the
  // vectorizing and unrolling that matters.
  const std::int64_t trip = loop.trip_count();
  if (trip == 0) return;
  mov_imm(slot(loop.var), loop.begin);
  if (trip == 1) {
    // Its variable is a constant the tiles inside may evaluate their guards with.
    known_[loop.var] = loop.begin;
    for (const ir::Stmt& s : loop.body) emit_stmt(s);
    known_.erase(loop.var);
    return;
  }
  Label body;
  L(body);
  k1_count_ = -1;  // the back edge arrives with whatever mask the body's end left
  for (const ir::Stmt& s : loop.body) emit_stmt(s);
  k1_count_ = -1;
  add(slot(loop.var), static_cast<std::uint32_t>(loop.step));
  cmp(slot(loop.var), static_cast<std::uint32_t>(loop.begin + trip * loop.step));
  jl(body, T_NEAR);
}

}  // namespace convjit::codegen::x86
