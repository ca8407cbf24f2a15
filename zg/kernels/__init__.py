"""The speed layer: numba kernels, each beside the torch reference it equals."""
