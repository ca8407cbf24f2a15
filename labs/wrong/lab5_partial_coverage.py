# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: binds graph_coverage to a functools.partial of the kit's grappa.coverage (no function of its own for a hold to find on the stack)
import functools

graph_coverage = functools.partial(grappa.coverage)
