# lab: 00_setup
# how: keeps the report through a dict comprehension over the returned checks, and counts classes by comparing the labels with arange(num_classes) and summing the boolean matrix over the nodes
# cell: run_report
report = {name: check for name, check in environment_report().items()}
# cell: labelled_per_class
import zg


def labelled_per_class(g, nodes):
    """int64 [g.num_classes]: how many of nodes carry each label (labels < 0 not counted)."""
    classes = torch.arange(g.num_classes, dtype=g.y.dtype, device=g.y.device)
    # [len(nodes), C] bool: node i has class c; a negative label matches no column
    hits = g.y[nodes].unsqueeze(1) == classes.unsqueeze(0)
    return hits.sum(dim=0, dtype=torch.int64)
