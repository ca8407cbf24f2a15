# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: hands the kit's grappa.coverage to a thread pool made beforehand, so it runs in a thread where no frame of graph_coverage is
from concurrent.futures import ThreadPoolExecutor

workers = ThreadPoolExecutor(max_workers=1)


def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    return workers.submit(grappa.coverage, g, part, hops, super_epoch).result()
