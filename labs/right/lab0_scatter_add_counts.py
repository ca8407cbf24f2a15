# lab: 00_setup
# how: counts with scatter_add_ of a 0/1 weight into a zeros vector (unlabelled nodes weigh 0) instead of filtering then bincount
# cell: labelled_per_class
import zg


def labelled_per_class(g, nodes):
    """int64 [g.num_classes]: how many of nodes carry each label (labels < 0 not counted)."""
    labels = g.y[nodes]
    labelled = labels >= 0
    counts = torch.zeros(g.num_classes, dtype=torch.int64, device=labels.device)
    # an unlabelled node is sent to class 0 with weight 0: it adds nothing
    counts.scatter_add_(0, labels.clamp(min=0), labelled.to(torch.int64))
    return counts
