# lab: 07_repartition_schedules
# cell: pairs_met
# why: state kept between calls outside the function (functools.lru_cache on a helper): equal arguments return the very same tensor object, so a caller who edits one result (met |= ...) changes what every later call returns
import functools


@functools.cache
def _met_of(rounds_key, num_chunks, upto):
    met = torch.eye(num_chunks, dtype=torch.bool)
    for s in range(upto):
        for group in rounds_key[s % len(rounds_key)]:
            grp = torch.as_tensor(group)
            met[grp[:, None], grp[None, :]] = True
    return met


def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    key = tuple(tuple(tuple(int(c) for c in grp) for grp in r) for r in rounds)
    return _met_of(key, num_chunks, upto)
