"""Baselines the kit compares against. Each imports DGL (or other heavy dependencies) lazily,
so ``import zg`` never needs them."""
