"""A cache of host copies of small device tensors (cu_seqlens) that a loop passes again and again."""
import collections
import threading

_COPIES = collections.OrderedDict()  # (data_ptr, numel, dtype, device) -> (tensor, version, host copy)
_LOCK = threading.Lock()
_ENTRIES = 8


def cached_host_copy(t):
    """t.to("cpu"), cached. The entry holds t, so its memory cannot be reused by another tensor while cached; a
    tensor with the same data pointer and size shares t's storage (and, for views, its version counter), so an
    in-place change shows as a new version and the copy is taken again."""
    key = (t.data_ptr(), t.numel(), t.dtype, t.device)
    with _LOCK:
        hit = _COPIES.get(key)
        if hit is not None and hit[1] == t._version:
            _COPIES.move_to_end(key)
            return hit[2]
    host = t.to("cpu")
    with _LOCK:
        _COPIES[key] = (t, t._version, host)
        _COPIES.move_to_end(key)
        while len(_COPIES) > _ENTRIES:
            _COPIES.popitem(last=False)
    return host
