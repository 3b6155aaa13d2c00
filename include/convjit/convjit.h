/* convjit C ABI: opaque kernel handles, status codes and a thread-local last-error message.
 * No C++ exception ever crosses this boundary. Include this header alone from C or C++. */
#ifndef CONVJIT_CONVJIT_H_
#define CONVJIT_CONVJIT_H_

#include <stddef.h>
#include <stdint.h>

#include "convjit/version.h"

/* Marks what libconvjit exports; everything else in the library is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define CONVJIT_API __attribute__((visibility("default")))
#else
#define CONVJIT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum convjit_status {
  CONVJIT_OK = 0,
  CONVJIT_INVALID_ARGUMENT = 1, /* bad descriptor or tensor; message is TensorFlow's text */
  CONVJIT_UNIMPLEMENTED = 2,
  CONVJIT_RESOURCE_EXHAUSTED = 3,
  CONVJIT_INTERNAL = 4, /* a bug in convjit */
  CONVJIT_NOT_FOUND = 5,
  CONVJIT_UNAVAILABLE = 6
} convjit_status;

typedef enum convjit_dtype {
  CONVJIT_HALF = 0,
  CONVJIT_BFLOAT16 = 1,
  CONVJIT_FLOAT32 = 2,
  CONVJIT_FLOAT64 = 3
} convjit_dtype;

#define CONVJIT_MAX_RANK 8

/* A dense tensor in its op's layout (activations in data_format order, filters HWIO). */
typedef struct convjit_tensor {
  convjit_dtype dtype;
  int32_t rank;
  int64_t shape[CONVJIT_MAX_RANK];
  void* data;
} convjit_tensor;

/* One op instance, field for field as TensorFlow receives it. Pointers may be NULL when their
 * length is 0. NULL strings take TensorFlow's defaults (data_format "NHWC"). */
typedef struct convjit_op_desc {
  const char* op; /* "Conv2DBackpropInput" or "conv2d_backprop_input", ... */
  convjit_dtype dtype;
  const char* data_format;  /* "NHWC" or "NCHW" */
  const char* padding;      /* "SAME", "VALID" or "EXPLICIT" */
  const int64_t* input;     /* input_sizes values, or the input tensor's shape */
  int32_t input_len;
  const int64_t* filter;    /* filter_sizes values, or the filter tensor's shape */
  int32_t filter_len;
  const int64_t* out_backprop; /* out_backprop's shape (backprop ops) */
  int32_t out_backprop_len;
  const int64_t* strides;
  int32_t strides_len;
  const int64_t* dilations; /* NULL: all ones */
  int32_t dilations_len;
  const int64_t* explicit_paddings;
  int32_t explicit_paddings_len;
} convjit_op_desc;

typedef struct convjit_kernel convjit_kernel;

/* An embedding framework's parallel loop: must call body(body_ctx, begin, end) over chunks
 * covering [0, n) and return when all are done. */
typedef void (*convjit_parallel_for_fn)(void* ctx, int64_t n,
                                        void (*body)(void* body_ctx, int64_t begin, int64_t end),
                                        void* body_ctx);

/* Compiles (or fetches from the cache) a kernel for the CPU with the default options. On
 * success *out owns a new handle. */
CONVJIT_API convjit_status convjit_compile(const convjit_op_desc* desc, convjit_kernel** out);

typedef enum convjit_math_mode {
  CONVJIT_MATH_EXACT = 0, /* float32 computed in float32 (the default) */
  CONVJIT_MATH_TF32 = 1   /* float32 products on NVIDIA tensor cores' TF32 */
} convjit_math_mode;

/* What compile may choose beyond the descriptor. Zero-initialise it ({0}) for the defaults. */
typedef struct convjit_compile_options {
  const char* device;       /* "cpu" (also NULL), "cuda" (device 0), "cuda:N", "cuda-interpret" */
  const char* backend;      /* "x86", "interpreter", "cuda", ...; NULL: the device's best */
  int32_t num_threads;      /* CPU threads a run may use; 0: CONVJIT_NUM_THREADS, else all cores */
  int32_t math_mode;        /* a convjit_math_mode */
  int32_t nondeterministic; /* non-zero: device reductions may use floating-point atomics */
  int32_t always_compile;   /* non-zero: bypass every cache */
} convjit_compile_options;

/* convjit_compile with options (NULL: the defaults). */
CONVJIT_API convjit_status convjit_compile_with_options(const convjit_op_desc* desc,
                                                        const convjit_compile_options* options,
                                                        convjit_kernel** out);
/* The same from a canonical descriptor text line. */
CONVJIT_API convjit_status convjit_compile_text(const char* descriptor_text, convjit_kernel** out);

/* Runs the op: a and b are its operands in TensorFlow's argument order (see convjit.hpp),
 * out receives the result. Safe to call from many threads at once on one kernel. out's bytes
 * must not overlap a's or b's (no in-place runs): an overlap is CONVJIT_INVALID_ARGUMENT and
 * nothing is written. */
CONVJIT_API convjit_status convjit_run(const convjit_kernel* kernel, const convjit_tensor* a,
                                       const convjit_tensor* b, const convjit_tensor* out);

/* What a run needs besides its tensors (device kernels); zero-initialise it for the defaults. */
typedef struct convjit_run_context {
  void* stream;           /* CUstream / cudaStream_t to queue on; NULL: the default stream */
  void* workspace;        /* device workspace of at least convjit_kernel_workspace_bytes bytes;
                             NULL: convjit allocates (and keeps) its own */
  size_t workspace_bytes; /* size of workspace */
} convjit_run_context;

/* convjit_run on a device stream with an optional workspace (context NULL: the defaults). A
 * CUDA kernel's tensor data are device pointers and the call returns once the work is queued;
 * CPU kernels ignore the context. */
CONVJIT_API convjit_status convjit_run_with_context(const convjit_kernel* kernel,
                                                    const convjit_tensor* a,
                                                    const convjit_tensor* b,
                                                    const convjit_tensor* out,
                                                    const convjit_run_context* context);

/* convjit_run_with_context (context may be NULL) whose CPU parallel loops go, for this run only,
 * through fn(fn_ctx, ...): the thread pool of the framework the call comes from, so a process
 * embedding several frameworks runs each one's kernels on its own pool. fn NULL: the kernel's
 * usual loop (convjit_set_parallel_for's hook, else convjit's pool). Device kernels ignore fn. */
CONVJIT_API convjit_status convjit_run_with_parallel_for(const convjit_kernel* kernel,
                                                         const convjit_tensor* a,
                                                         const convjit_tensor* b,
                                                         const convjit_tensor* out,
                                                         const convjit_run_context* context,
                                                         convjit_parallel_for_fn fn, void* fn_ctx);

/* Validates desc as convjit_compile does (TensorFlow's checks, order and messages) and stores the
 * shape of the op's result in shape[0..3]; nothing is compiled. For frameworks that need the
 * result's shape (and TensorFlow's error) while tracing, before any kernel runs. */
CONVJIT_API convjit_status convjit_infer_output_shape(const convjit_op_desc* desc,
                                                      int64_t shape[CONVJIT_MAX_RANK]);

/* Device workspace bytes one run needs (0 for CPU kernels and on error). */
CONVJIT_API size_t convjit_kernel_workspace_bytes(const convjit_kernel* kernel);

/* Releases a handle; NULL is ignored. */
CONVJIT_API void convjit_destroy(convjit_kernel* kernel);

/* Expected shape of operand 0 (a), 1 (b) or 2 (out); returns its rank (4) or -1. */
CONVJIT_API int32_t convjit_kernel_operand_shape(const convjit_kernel* kernel, int32_t index,
                                                 int64_t shape[CONVJIT_MAX_RANK]);
/* Strings owned by the kernel, valid until it is destroyed. */
CONVJIT_API const char* convjit_kernel_name(const convjit_kernel* kernel);
CONVJIT_API const char* convjit_kernel_backend(const convjit_kernel* kernel);
/* "cpu", "cuda:0", "cuda-interpret", ...: where the kernel expects its tensors. */
CONVJIT_API const char* convjit_kernel_device(const convjit_kernel* kernel);
CONVJIT_API const char* convjit_kernel_descriptor(const convjit_kernel* kernel);

/* Routes every later run's parallel loops through fn (NULL restores convjit's pool). */
CONVJIT_API convjit_status convjit_set_parallel_for(convjit_parallel_for_fn fn, void* ctx);

/* The loaded library's version, "MAJOR.MINOR.PATCH" (CONVJIT_VERSION_STRING of the headers it
 * was built with; compare with this file's macros to detect a mismatched installation). */
CONVJIT_API const char* convjit_version(void);

/* The message of this thread's last failed call ("" if none). */
CONVJIT_API const char* convjit_last_error(void);
CONVJIT_API const char* convjit_status_name(convjit_status status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONVJIT_CONVJIT_H_ */
