# lab: 00_setup
# cell: labelled_per_class
# why: counts into torch.zeros(g.num_classes) made without device=: right on a CPU, but on a GPU the counts sit on the host and index_add_ of the graph's labels into them fails


def labelled_per_class(g, nodes):
    """int64 [g.num_classes]: how many of nodes carry each label (labels < 0 not counted)."""
    labels = g.y[nodes]
    labels = labels[labels >= 0]
    counts = torch.zeros(g.num_classes, dtype=torch.int64)
    return counts.index_add_(0, labels, torch.ones_like(labels))
