# lab: 00_setup
# cell: labelled_per_class
# why: counts on the host with collections.Counter over .tolist(), then builds the tensor with torch.tensor(...) and no device=: the values are right, but on a GPU the result is on the CPU
import collections


def labelled_per_class(g, nodes):
    """int64 [g.num_classes]: how many of nodes carry each label (labels < 0 not counted)."""
    seen = collections.Counter(v for v in g.y[nodes].tolist() if v >= 0)
    return torch.tensor([seen[c] for c in range(g.num_classes)], dtype=torch.int64)
