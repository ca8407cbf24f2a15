# lab: 01_host_syncs
# cell: sync_ops
# why: caches the counts by the function's name in a global dict: a second function of the same name (a lambda made in a loop, another sampler) gets the first one's counts (a cache that ignores a change of setting, and state kept between calls)
_counts_by_code = {}


def sync_ops(fn):
    """{op name: count} of every host sync made while running fn()."""
    key = getattr(fn, "__qualname__", repr(fn))
    if key not in _counts_by_code:
        with SyncAudit(strict=True) as audit:
            fn()
        _counts_by_code[key] = dict(audit.per_op)
    return dict(_counts_by_code[key])
