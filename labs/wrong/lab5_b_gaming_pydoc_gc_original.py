# lab: 05_coverage_by_propagation
# cell: propagation
# why: gaming: reaches gc and sys without importing them (pydoc.locate("gc"), pydoc.locate("sys").modules), walks gc.get_objects() for the function named _propagate of the kit's coverage module that is not the held one (the unheld original the hold keeps for the tests) and calls it on a duck-typed graph
import pydoc
import types


def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    kit = pydoc.locate("sys").modules["zg.grappa.coverage"]
    held = kit._propagate
    for obj in pydoc.locate("gc").get_objects():
        if (
            isinstance(obj, types.FunctionType)
            and obj.__name__ == "_propagate"
            and obj is not held
            and obj.__module__ == "zg.grappa.coverage"
        ):
            graph = types.SimpleNamespace(
                edges=lambda: (src, dst), num_nodes=num_nodes, device=deg.device
            )
            return obj(graph, deg, hops)  # a stand-in graph: no host sync to build it
    raise LookupError("no original")
