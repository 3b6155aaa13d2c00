"""The on-disk kernel cache, as ``convjit cache list|stats|purge`` shows it.

The directory is ``$CONVJIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/convjit``, else
``~/.cache/convjit`` (``CONVJIT_CACHE_DIR=off`` disables it); each call reads it anew.
"""

import json as _json
import re as _re

from . import _convjit

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def list():  # noqa: A001 - mirrors `convjit cache list`
    """The entries, most recently used first: one dict per entry with its metadata (key_hash,
    descriptor, op, dtype, layout, shape, backend, isa, kernel_name, compile_ms, hits,
    compiles, created_ms, last_used_ms, ...), ``bytes`` on disk and ``age_s``. An entry whose
    metadata is unreadable is ``{"key_hash", "damaged", "bytes"}``."""
    return _json.loads(_convjit.cache_list_json())


def stats():
    """Totals: ``enabled``, ``directory``, ``entries``, ``bytes``, ``bytes_on_disk``,
    ``max_bytes``, ``hits``, ``misses``, ``damaged_metadata``, compile-time percentiles
    (``compile_ms_total``, ``compile_ms_p50`` / ``p90`` / ``p99`` / ``max``) and the same per
    backend (``by_backend``) and per op and dtype (``by_op``)."""
    return _json.loads(_convjit.cache_stats_json())


def _seconds(older_than):
    if older_than is None:
        return 0
    if isinstance(older_than, str):
        match = _re.fullmatch(r"(\d+)([smhd]?)", older_than.strip())
        if not match:
            raise _convjit.Error("older_than: %r is not a duration (e.g. 7d, 12h, 30m, 90s)" % older_than)
        return int(match.group(1)) * _UNITS[match.group(2)]
    seconds = int(older_than)
    if seconds <= 0:
        raise _convjit.Error("older_than must be a positive number of seconds, but got %r" % older_than)
    return seconds


def purge(*, all=False, older_than=None, max_bytes=None, op=None, dtype=None, backend=None, isa=None):
    """Removes entries and returns ``{"removed_entries", "removed_bytes", "remaining_bytes",
    "directory"}``.

    Args:
      all: remove every entry (that matches the filters).
      older_than: entries not used for this long: seconds, or "90s", "30m", "12h", "7d".
      max_bytes: evict least recently used entries until the directory holds at most this.
      op, dtype, backend, isa: filters (TensorFlow or Python op name, "float32", "x86",
        "avx512", ...).

    Raises:
      convjit.Error: nothing selected (give all, older_than, max_bytes or a filter).
    """
    if max_bytes is not None:
        max_bytes = int(max_bytes)
    return _json.loads(_convjit.cache_purge_json(bool(all), _seconds(older_than), max_bytes, op or "",
                                                 dtype or "", backend or "", isa or ""))
