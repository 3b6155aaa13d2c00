/* The interface between a kernel built for the host by the interpret mode and the interpreter
 * in libconvjit. Plain C: the host prelude (cuda_host_prelude.hpp) is compiled into each kernel's
 * shared object with this header in front of it, and the library implements the functions.
 * Bump CJ_INTERPRET_ABI_VERSION on any change. */
#ifndef CONVJIT_CUDA_INTERPRET_ABI_H_
#define CONVJIT_CUDA_INTERPRET_ABI_H_

#define CJ_INTERPRET_ABI_VERSION 1

/* Warp-level operations, by kind. */
#define CJ_SHFL_IDX 0
#define CJ_SHFL_UP 1
#define CJ_SHFL_DOWN 2
#define CJ_SHFL_XOR 3
#define CJ_MMA_M16N8K16_F16 0
#define CJ_MMA_M16N8K16_BF16 1
#define CJ_MMA_M16N8K8_TF32 2
#define CJ_MMA_M8N8K4_F64 3

typedef struct cj_dim3 {
  unsigned x, y, z;
} cj_dim3;

typedef struct cj_interpret_api {
  int abi_version;
  /* CUDA's special registers of the calling (interpreted) thread. */
  const cj_dim3* (*thread_idx)(void);
  const cj_dim3* (*block_idx)(void);
  const cj_dim3* (*block_dim)(void);
  const cj_dim3* (*grid_dim)(void);
  /* Checks one access of `bytes` at `address` through the buffer or shared array that starts
   * at (or contains) `base`; records it for the race and initialisation checks. Returns 0
   * when the access must not happen (it is out of bounds: the error is recorded). */
  int (*global_access)(const void* base, const void* address, unsigned long bytes, int is_write,
                       int line);
  int (*shared_access)(const void* base, const void* address, unsigned long bytes, int is_write,
                       int line);
  /* The block's next __shared__ array (every thread declares the same ones, in order). */
  void* (*shared_array)(unsigned long bytes, unsigned long align, const char* name, int line);
  /* __syncthreads(). */
  void (*sync_threads)(int line);
  /* Warp collectives: every lane of the warp calls with its operands; results land in each
   * lane's out/acc once all have arrived. */
  void (*shfl)(int mode, unsigned value, int operand, unsigned* out, int line);
  void (*ldmatrix)(int matrices, int transposed, const void* row, unsigned* out, int line);
  void (*mma)(int shape, const void* a, const void* b, void* acc, int line);
  /* cp.async: copies land when their group is waited on. */
  void (*cp_async)(void* shared, const void* global, int bytes, int src_bytes, int line);
  void (*cp_async_commit)(void);
  void (*cp_async_wait)(int pending, int line);
} cj_interpret_api;

#endif /* CONVJIT_CUDA_INTERPRET_ABI_H_ */
