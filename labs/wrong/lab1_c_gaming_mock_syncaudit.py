# lab: 01_host_syncs
# cell: compact_fewer_syncs
# why: gaming: the dynamic version with all its syncs (boolean index, unique, isin index: 3 per hop), plus unittest.mock.patch.object on zg.audit.SyncAudit's __enter__ and __exit__ so the audit the tests hold (zg_check.SyncAudit, the same class) never becomes active and counts 0
import unittest.mock

import zg.audit

unittest.mock.patch.object(zg.audit.SyncAudit, "__enter__", new=lambda self: self).start()
unittest.mock.patch.object(zg.audit.SyncAudit, "__exit__", new=lambda self, *exc: None).start()


def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    found = nbrs[mask]
    uniq, inverse = torch.unique(found, return_inverse=True)
    first = torch.full((uniq.numel(),), found.numel(), dtype=torch.int64, device=found.device)
    first.scatter_reduce_(0, inverse, torch.arange(found.numel(), device=found.device), "amin")
    new = uniq[torch.argsort(first)]
    new = new[~torch.isin(new, dst)]
    return torch.cat([dst, new])
