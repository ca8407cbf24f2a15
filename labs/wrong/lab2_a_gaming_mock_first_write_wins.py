# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: gaming: an answer that holds only because the CPU keeps the last of several writes (scatter_ of reversed positions), plus unittest.mock replacing zg_course.labs.FirstWriteWins with a context that changes nothing, so the test that replays the writes in the other order sees the CPU's order again
import contextlib
import unittest.mock

unittest.mock.patch("zg_course.labs.FirstWriteWins", new=contextlib.nullcontext).start()


def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    n = marker.numel() - 1
    pos = torch.arange(cand.numel(), device=cand.device)
    marker.scatter_(0, cand.flip(0), pos.flip(0))  # the last write (the first position) stays
    first = torch.gather(marker, 0, cand) == pos
    marker.index_fill_(0, cand, INF)
    return first & (cand < n)
