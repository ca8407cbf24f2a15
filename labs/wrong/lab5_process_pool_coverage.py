# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: hands the work to a concurrent.futures process pool (its default start method), where the kit's function may be unheld
import concurrent.futures


def graph_coverage(g, part, hops=2):
    with concurrent.futures.ProcessPoolExecutor(1) as pool:
        return pool.submit(grappa.coverage, g, part, hops).result()
