# lab: 00_setup
# how: maps unlabelled nodes to an extra trash class, one-hot encodes with num_classes + 1 columns, sums the columns and drops the trash one
# cell: labelled_per_class
import zg
import torch.nn.functional as F


def labelled_per_class(g, nodes):
    """int64 [g.num_classes]: how many of nodes carry each label (labels < 0 not counted)."""
    labels = g.y[nodes]
    trash = g.num_classes
    labels = torch.where(labels < 0, torch.full_like(labels, trash), labels)
    onehot = F.one_hot(labels, num_classes=g.num_classes + 1)
    return onehot.sum(dim=0)[:trash].to(torch.int64)
