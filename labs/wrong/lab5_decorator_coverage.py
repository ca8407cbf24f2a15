# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: a decorator swaps graph_coverage for a wrapper (functools.wraps keeps its name and docstring) that calls the kit's grappa.coverage
import functools


def computed_by(kit):
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return kit(*args, **kwargs)

        return wrapper

    return decorate


@computed_by(grappa.coverage)
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    raise NotImplementedError
