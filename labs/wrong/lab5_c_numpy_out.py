# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: a tensor made on the CPU whatever the inputs' device: the output is allocated with numpy and wrapped with torch.from_numpy (not one of the factory calls the device clause redirects), so on a GPU graph it returns a CPU tensor
import numpy as np


def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    out = torch.from_numpy(np.zeros(g.num_nodes, dtype=np.float32))
    for worker in range(part.num_parts):
        loc = part.local_graph(g, worker, super_epoch)
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        out[loc.global_ids[: loc.num_owned].cpu()] = c[: loc.num_owned].cpu()
    return out
