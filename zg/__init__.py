"""zg: a teaching and analysis kit for ZeroGNN (host-free, envelope-sized, CUDA-Graph-captured
GNN training iterations) and Grappa (gradient-only distributed GNN training).

    import zg
    g = zg.datasets.load("cora")
"""

from . import datasets
from .graph import Graph

__version__ = "0.1.0"
__all__ = ["Graph", "datasets", "__version__"]
