# lab: 01_host_syncs
# cell: dynamic_compact
# why: the right order by Python loops over a .tolist() copy of the hop: the whole hop goes to the host
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    out = dst.tolist()
    for node, real in zip(nbrs.flatten().tolist(), mask.flatten().tolist()):
        if real and node not in out:
            out.append(node)
    return torch.tensor(out, dtype=torch.int64)
