# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: binds graph_coverage to an object whose __call__ hands the work to the kit's grappa.coverage
class CoverageOfEveryNode:
    """float32 [N]: c_hops of every node, in its owner's local graph."""

    def __call__(self, g, part, hops, super_epoch=0):
        return grappa.coverage(g, part, hops, super_epoch)


graph_coverage = CoverageOfEveryNode()
