// The x86 code generator: one Xbyak::CodeGenerator that turns a scheduled LoopNest into one
// machine-code function per top-level statement, every bound and coefficient an immediate.
//
// Generated function ABI (System V): void fn(void* const* buffers, int64_t begin, int64_t end)
// where buffers[i] is the base pointer of nest.buffers[i] and [begin, end) is the slice of a
// top-level parallel loop's iteration indices (0, 1 for any other statement).
//
// Register conventions inside a function:
//   r15 buffer pointer table, rbp frame pointer, rsp 64-byte aligned frame;
//   rax rcx rdx scratch; rsi rdi r8 the a, b, c pointers of a tile (Store: r8 dst, r9 src);
//   rbx r9..r14 reduce-loop counters of a tile (further levels live in their stack slots).
// Frame: [rsp, rsp+64) a bounce buffer for lane-by-lane loads and stores, then one 8-byte slot
// per loop variable, then a slot for a parallel loop's end value; on AMX targets then a tile
// configuration and four accumulator tiles' worth of f32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include <xbyak/xbyak.h>

#include "codegen/x86/access_info.hpp"
#include "codegen/x86/kernel_layout.hpp"
#include "ir/ir.hpp"
#include "codegen/cpu/cpu_info.hpp"

namespace convjit::codegen::x86 {

class Emitter : public Xbyak::CodeGenerator {
 public:
  /// Generates into a fresh read-write buffer of `max_bytes`; the caller flips it to
  /// read+execute once done.
  Emitter(const ir::LoopNest& nest, const cpu::CpuInfo& target, std::size_t max_bytes);

  /// Emits every function and the constant pool. Throws Xbyak::Error (code too big, bad
  /// operand): the backend turns it into a Status.
  std::vector<FunctionEntry> emit_all();

 private:
  // A memory reference for a vector of `count` lanes: lane l lives at
  // base + disp + l * lane_stride * elem_bytes.
  struct VecRef {
    Xbyak::Reg64 base;
    std::int64_t disp = 0;
    std::int64_t lane_stride = 1;  // in elements; 1 is contiguous
    int count = 0;                 // valid lanes
  };

  // ---- functions and loops (emitter.cpp)
  void emit_function(const ir::Stmt& stmt, FunctionEntry* entry);
  void emit_stmt(const ir::Stmt& stmt);
  void emit_loop(const ir::Loop& loop);
  Xbyak::Address slot(ir::VarId v) const;
  // dst = sum(coef * var) * scale + constant * scale, with variables in registers (per
  // var_reg_) or stack slots. Clobbers rax (and rcx for 64-bit coefficients). dst != rax.
  void emit_affine(const Xbyak::Reg64& dst, const ir::Affine& e, std::int64_t scale,
                   bool accumulate);
  // dst = buffers[access.buffer] + offset(access) * elem_bytes, with the listed variables
  // treated as 0 (row/column/reduce variables handled by displacements and bumps).
  void emit_base_pointer(const Xbyak::Reg64& dst, const AccessInfo& info,
                         const std::vector<ir::VarId>& zeroed, std::int64_t extra_elems);
  void add_imm(const Xbyak::Reg64& reg, std::int64_t value);
  void mov_imm(const Xbyak::Address& dst, std::int64_t value);

  // ---- tiles (emit_tile.cpp, emit_paired_tile.cpp, emit_sliding_tile.cpp)
  void emit_tile(const ir::Tile& tile);
  // A paired bfloat16 tile: one vdpbf16ps per (row, vector) per pair of reduction points.
  void emit_paired_tile(const ir::Tile& tile);
  // The same on AMX (emit_amx_tile.cpp), where the target has it and the tile's operands are
  // in its layouts (guards on the rows already split off); false, emitting nothing, otherwise.
  bool emit_amx_tile(const ir::Tile& tile, const AccessInfo& a, const AccessInfo& b,
                     const AccessInfo& c);
  // An elementwise tile whose rows read overlapping windows of `a` along its innermost reduce
  // loop (a depthwise input gradient's rows of W positions against the filter's taps along
  // W): that loop's taps of `b` held in registers and each distinct vector of `a` loaded once
  // for every (row, tap) that reads it, the (row, tap) pairs its guards exclude left out
  // (guards on the row, that loop and constants only). Returns false, emitting nothing, where
  // the tile is not of that form or its registers do not fit.
  bool emit_sliding_tile(const ir::Tile& tile, const AccessInfo& a, const AccessInfo& b,
                         const AccessInfo& c);
  // One accumulator of a tile and where it goes.
  struct TileStore {
    int acc;
    VecRef ref;
  };
  // A tile's accumulators written back to `c` (t1, t2 temporaries), from a group of
  // `group_cols` of its columns (the tile's columns run group after group, each over all its
  // rows): when the tile streams, all its vectors are whole and streaming keeps its lines
  // whole (streams_whole_lines), past the caches if the output pointer r8 starts a cache line
  // at run time and plainly otherwise.
  void emit_tile_stores(const ir::Tile& t, const AccessInfo& c, bool whole_vectors,
                        std::int64_t group_cols, const std::vector<TileStore>& stores, int t1,
                        int t2);
  // Whether non-temporal stores suit `t` written in column groups of `group_cols` columns:
  // each group writes whole lines, or the rows are few (see emit_tile.cpp).
  static bool streams_whole_lines(const ir::Tile& t, const AccessInfo& c, std::int64_t group_cols);

  // ---- a tile's reduction loops (emit_reduce.cpp)
  // Innermost reduce loops of at most this many iterations are unrolled whole.
  static constexpr std::int64_t kFullUnrollTrip = 8;
  // Where the innermost reduce loop's unrolled copies are: its variable and step, and the a
  // and b pointer steps in bytes per iteration.
  struct ReduceCursor {
    ir::VarId inner_var = -1;
    std::int64_t inner_step = 0;
    std::int64_t da = 0;
    std::int64_t db = 0;
    // Copies per pass of the innermost loop's body (its whole trip when unrolled whole).
    std::int64_t unroll = 1;
  };
  // The a and b offsets (in elements) at the first reduction point, the variables their base
  // pointers leave out, and whether some reduce loop is empty.
  struct ReduceStart {
    std::int64_t a_elems = 0;
    std::int64_t b_elems = 0;
    std::vector<ir::VarId> zeroed;
    bool empty = false;
  };
  void bind_reduce_counters(const ir::Tile& t);
  void release_reduce_counters(const ir::Tile& t);
  ReduceStart reduce_start(const ir::Tile& t, const AccessInfo& a, const AccessInfo& b) const;
  // The reduce loops around `k_step(u)` (u: the unrolled copy of the innermost loop), with rsi
  // and rdi the a and b pointers; `accumulators` sets the unroll depth.
  void emit_reduce_levels(const ir::Tile& t, const AccessInfo& a, const AccessInfo& b,
                          std::int64_t accumulators, ReduceCursor* cur,
                          const std::function<void(std::int64_t)>& k_step);
  // In copy `u` of the innermost reduce loop, prefetches the lines that rows r0..r0+rows-1 of
  // the tile's next row group (rows + t.rows) will read of per-row operand `x` through
  // `ptr_reg`, where the tile is marked to (prefetch_streamed_rows).
  void emit_next_rows_prefetch(const ir::Tile& t, const AccessInfo& x, const Xbyak::Reg64& ptr_reg,
                               std::int64_t step_bytes, std::int64_t r0, std::int64_t rows,
                               const ReduceCursor& cur, std::int64_t u);
  void emit_next_block_prefetch(const AccessInfo& x, std::int64_t distance,
                                const Xbyak::Reg64& ptr_reg, std::int64_t step_bytes,
                                std::int64_t u, std::int64_t first_byte, std::int64_t bytes);
  // Jumps to `skip` unless `guard` holds with the row variable at `row` (ignored when
  // row_var < 0) and `inner_var` advanced by `inner_offset` over its register or slot.
  void emit_guard_check(const ir::Guard& guard, ir::VarId row_var, std::int64_t row,
                        ir::VarId inner_var, std::int64_t inner_offset, Xbyak::Label& skip);

  // ---- stores (emit_store.cpp)
  bool try_emit_vector_store_loop(const ir::Loop& loop);
  // `body` run `iterations` times (none when 0), r10 counting down.
  void emit_counted_loop(std::int64_t iterations, const std::function<void()>& body);
  // Two nested loops around a copy into f32 (from f32, or widening 16-bit elements)
  // contiguous along the inner loop in the destination and along the outer one in the
  // source (a layout change): 8x8 blocks through registers.
  bool try_emit_transpose_loop(const ir::Loop& outer);
  // A loop whose body is two plain copies (each Store has a source and overwrites), step 1:
  // the stores and their accesses analysed along the loop, destinations d0/d1 and sources
  // s0/s1. The repeat and interleave copies below start from it.
  // With `zero_second` allowed, the second store may instead write zero (no source: s1 left
  // empty, zero_second set).
  struct CopyPair {
    const ir::Store* first = nullptr;
    const ir::Store* second = nullptr;
    AccessInfo d0, d1, s0, s1;
    bool zero_second = false;
  };
  bool analyze_copy_pair(const ir::Loop& loop, CopyPair* out, bool allow_zero_second = false);
  // A loop storing each source element to two adjacent f32 destination elements (the NCHW
  // depthwise copy of dy with repeated columns), a vector at a time.
  bool try_emit_repeat_store_loop(const ir::Loop& loop);
  // A loop storing two 16-bit sources into the two halves of each dword of the destination
  // (copy_batch_operands' interleaved image pairs), a vector of pairs at a time; or one source
  // and zero (a row chunk without a partner).
  bool try_emit_interleave_store_loop(const ir::Loop& loop);
  void emit_scalar_store(const ir::Store& store);

  // ---- dtype conversions (emit_convert.cpp). Vector registers hold the accumulator type
  // (f32, or f64 for float64 data).
  const Xbyak::Xmm& vreg(int idx) const;  // zmm or ymm
  const Xbyak::Xmm& hreg(int idx) const;  // the half-width register of the same index
  int lanes(DType acc) const { return target_.vector_bytes / dtype_size(acc); }
  void set_mask(int count);  // k1 = low `count` lanes (AVX-512)
  void zero_vector(int idx);  // vpxord on AVX-512 (vxorps zmm would need AVX512DQ)
  void load_vector(int dst, DType dtype, const VecRef& ref);
  // A full vector of strided f32 lanes built in registers (`tmp` is clobbered): the bounce
  // buffer's narrow stores followed by one wide load stall on store forwarding.
  void gather_f32(int dst, int tmp, const VecRef& ref);
  // An AVX2 tail of fewer than 8 contiguous f32 lanes, loaded without touching memory past it.
  void load_f32_tail(int dst, const VecRef& ref);
  void load_broadcast(int dst, DType dtype, const Xbyak::RegExp& addr);
  // Stores vector `src` (clobbered for 16-bit dtypes) using temporaries t1, t2.
  void store_vector(int src, DType dtype, const VecRef& ref, int t1, int t2);
  // A full contiguous vector stored past the caches (vmovntps/pd, or vmovntdq of the 16-bit
  // half-width register) to an address aligned to its width; like store_vector, `src` may be
  // clobbered and t1, t2 are temporaries. The function ends with an sfence once any was emitted.
  void store_vector_nontemporal(int src, DType dtype, const VecRef& ref, int t1, int t2);
  // Rounds f32 lanes of `src` to bfloat16 words; returns the register index whose half-width
  // register holds them. Uses t1, t2 (and may clobber src).
  int round_to_bf16(int src, int t1, int t2);
  void copy_lanes_to_bounce(const VecRef& ref, int elem_bytes);
  void copy_lanes_from_bounce(const VecRef& ref, int elem_bytes);
  // From this many lanes the copies run as a loop (rcx counts, rdx walks the strided side):
  // unrolled, a strided store of 16 lanes is 32 instructions, which made the stores half the
  // code of a W-vector tile and most of its compile time, and ran no faster than the loop.
  static constexpr int kLaneLoopMin = 8;
  void copy_lanes_loop(const VecRef& ref, int elem_bytes, bool to_bounce);
  static Xbyak::RegExp lane_addr(const VecRef& ref, std::int64_t lane, int elem_bytes);
  void copy_element(const Xbyak::RegExp& dst, const Xbyak::RegExp& src, int elem_bytes);
  // One 16-bit element (bfloat16 or half) widened to f32 at `dst`; clobbers eax and xmm0.
  void widen_element(const Xbyak::RegExp& dst, const Xbyak::RegExp& src, DType src_dtype);
  // Scalar element <-> xmm(idx) in f32 (or f64 when `wide`). Clobbers rax, rcx; `addr` must
  // not use them.
  void load_scalar(int idx, DType dtype, const Xbyak::RegExp& addr, bool wide);
  void store_scalar(int idx, DType dtype, const Xbyak::RegExp& addr, bool wide);
  void emit_constants();

  const ir::LoopNest& nest_;
  const cpu::CpuInfo& target_;
  bool avx512_;
  std::int64_t frame_bytes_ = 0;
  std::int64_t end_slot_ = 0;
  // On AMX targets the frame ends with a tile configuration (64 bytes), the id of the one
  // the tile registers hold (0: none), and room for four 16x16 f32 accumulator tiles on their
  // way to the vector registers.
  std::int64_t amx_config_offset_ = 0;
  std::int64_t amx_config_id_offset_ = 0;
  std::int64_t amx_accumulator_offset_ = 0;
  // Each distinct tile configuration of the kernel, numbered from 1: ldtilecfg costs about
  // 175 cycles (a 2026 Xeon), a fifth of a 1x1 layer's 32x32 tile, so a tile loads its
  // configuration only where the registers hold another one.
  std::map<std::array<std::uint8_t, 64>, int> amx_config_ids_;
  // The current function has run tiles on AMX: it releases the tile state before returning.
  bool amx_used_ = false;
  int k1_count_ = -1;  // lanes k1 currently holds, as known at the current emission point
  // The current function has non-temporal stores: they are weakly ordered, so it must end
  // with an sfence before the pool's synchronization publishes its results.
  bool streamed_ = false;
  // Register holding each variable inside a tile (reduce counters), or none: its slot.
  std::vector<int> var_reg_;
  // Variables of the single-iteration loops around the current statement, with their values.
  std::map<ir::VarId, std::int64_t> known_;
  // vreg() and hreg() by index, made once: an Xbyak register built per instruction (bit
  // fields written one by one, then read whole) was a tenth of the code generation time.
  static constexpr int kVectorRegisters = 32;
  std::array<Xbyak::Xmm, kVectorRegisters> vregs_, hregs_;
  Xbyak::Label const_one_, const_round_, const_quiet_, const_hi16_;
  Xbyak::Label const_repeat_;  // dwords i / 2: vpermps indices that repeat each lane twice
};

}  // namespace convjit::codegen::x86
