# lab: 01_host_syncs
# cell: compact_fewer_syncs
# why: two .tolist() and a Python set: "2 syncs < 3", although the whole hop goes to the host
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    seen = set(dst.tolist())
    new = []
    for node in torch.where(mask, nbrs, dst[0]).flatten().tolist():
        if node not in seen:
            seen.add(node)
            new.append(node)
    return torch.cat([dst, torch.tensor(new, dtype=torch.int64)])
