/* The C interface between `convjit bench` and a peer library (a shared object it loads with
 * dlopen). Each peer library is one convolution implementation built against one release of
 * its library: two oneDNN releases can then run in one process, each library resolved inside
 * its own peer's scope, which linking both into the benchmark could not do. Every function
 * catches its library's exceptions and reports them as text; nothing throws across this line. */
#ifndef CONVJIT_BENCH_PEER_ABI_H_
#define CONVJIT_BENCH_PEER_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change below; the benchmark refuses a library of another version. */
#define CONVJIT_PEER_ABI_VERSION 1

enum { CONVJIT_PEER_F32 = 0, CONVJIT_PEER_BF16 = 1, CONVJIT_PEER_F16 = 2, CONVJIT_PEER_F64 = 3 };

/* One gradient op on TensorFlow's tensors: x and dy NHWC, the filter HWIO ([KH,KW,C,M] for
 * depthwise). */
typedef struct convjit_peer_problem {
  int64_t n, h, w, ic, m, kh, kw, stride, dilation;
  int64_t out_h, out_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right;
  int32_t depthwise;         /* m is the depth multiplier; the output has ic * m channels */
  int32_t backprop_data;     /* 1: the input gradient, 0: the filter gradient */
  int32_t dtype;             /* CONVJIT_PEER_* */
  int32_t preferred_layouts; /* 0: the caller's layouts, reorders timed; 1: the library's own */
} convjit_peer_problem;

typedef struct convjit_peer_conv convjit_peer_conv;

typedef int (*convjit_peer_abi_version_fn)(void);
/* "onednn-2.6.3": the implementation and its release, as result records name it. */
typedef const char* (*convjit_peer_name_fn)(void);
/* Threads for the following runs, and the highest ISA ("avx2", or "" for the host's best). */
typedef void (*convjit_peer_configure_fn)(int threads, const char* max_isa);
/* NULL with the reason in `error` when the library cannot run the problem here. */
typedef convjit_peer_conv* (*convjit_peer_create_fn)(const convjit_peer_problem* problem,
                                                     char* error, size_t error_size);
/* Binds the caller's x, w and y (the op's output among them); 0 on success. With preferred
 * layouts the inputs are converted here, once, outside the timing. */
typedef int (*convjit_peer_bind_fn)(convjit_peer_conv* conv, void* x, void* w, void* y,
                                    char* error, size_t error_size);
/* One timed call; 0 on success. With preferred layouts the result stays in the library's
 * layout until convjit_peer_finish. */
typedef int (*convjit_peer_run_fn)(convjit_peer_conv* conv, char* error, size_t error_size);
/* Brings a preferred-layout result into the caller's output (not timed); 0 on success. */
typedef int (*convjit_peer_finish_fn)(convjit_peer_conv* conv, char* error, size_t error_size);
typedef double (*convjit_peer_creation_ms_fn)(const convjit_peer_conv* conv);
typedef void (*convjit_peer_destroy_fn)(convjit_peer_conv* conv);

#ifdef __cplusplus
}
#endif

#endif /* CONVJIT_BENCH_PEER_ABI_H_ */
