# lab: 01_host_syncs
# cell: sync_ops
# why: returns the audit's Counter itself where a new plain dict is promised: it compares equal to the dict, but answers 0 for an op never seen and shares the audit's object
def sync_ops(fn):
    """{op name: count} of every host sync made while running fn()."""
    with SyncAudit(strict=True) as audit:
        fn()
    return audit.per_op
