/* convjit's disk kernel cache, inspected from C (and from the Python package): what
 * `convjit cache list --json`, `stats --json` and `purge` show and do, as JSON text.
 * Every call reads the configured directory anew ($CONVJIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/convjit, else ~/.cache/convjit) and never creates it. No exception crosses
 * this boundary: failures return a status and set convjit_last_error(). */
#ifndef CONVJIT_CACHE_H_
#define CONVJIT_CACHE_H_

#include "convjit/convjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The entries, most recently used first, as a JSON array: each entry's metadata (key_hash,
 * descriptor, op, dtype, layout, shape, backend, isa, kernel_name, compile_ms, hits, compiles,
 * created_ms, last_used_ms, ...) plus "bytes" on disk and "age_s"; an entry whose metadata
 * cannot be read appears as {"key_hash", "damaged", "bytes"}. "[]" when the cache is off or
 * was never written. On success *json owns a string to release with convjit_free_string(). */
CONVJIT_API convjit_status convjit_cache_list_json(char** json);

/* Totals as a JSON object: "enabled", "directory", "entries", "bytes", "bytes_on_disk",
 * "max_bytes", "hits", "misses", "damaged_metadata", compile-time percentiles
 * ("compile_ms_total", "compile_ms_p50", "_p90", "_p99", "_max") and the same per
 * "by_backend" ("x86 avx512+...") and "by_op" ("Conv2DBackpropInput float32"). */
CONVJIT_API convjit_status convjit_cache_stats_json(char** json);

/* Which entries convjit_cache_purge removes; zero-initialise it, then set at least one of all,
 * older_than_seconds, has_max_bytes or a filter. Filters (NULL: any) narrow all/older_than. */
typedef struct convjit_cache_purge_options {
  int32_t all;                /* non-zero: every entry (that matches the filters) */
  int64_t older_than_seconds; /* > 0: entries not used for this long */
  int32_t has_max_bytes;      /* non-zero: also evict least recently used entries ... */
  int64_t max_bytes;          /* ... until the directory holds at most this many bytes */
  const char* op;             /* TensorFlow or Python op name */
  const char* dtype;          /* "float32", "bfloat16", ... */
  const char* backend;        /* "x86", "interpreter", ... */
  const char* isa;            /* "avx512", "avx2", ... (prefix of the target name) */
} convjit_cache_purge_options;

/* Removes entries; *json (may be NULL) receives {"removed_entries", "removed_bytes",
 * "remaining_bytes", "directory"}. CONVJIT_INVALID_ARGUMENT when nothing is selected. */
CONVJIT_API convjit_status convjit_cache_purge(const convjit_cache_purge_options* options,
                                               char** json);

/* Releases a string returned by the functions above; NULL is ignored. */
CONVJIT_API void convjit_free_string(char* text);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONVJIT_CACHE_H_ */
