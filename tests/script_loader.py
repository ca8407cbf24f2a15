"""Import the repo's scripts (bench/, tools/) in tests. A module of its own, not conftest:
with several conftest.py files in the tree, ``import conftest`` may find another one."""


def load_script(path, name: str):
    """Import a script of the repo (a bench/ or tools/ file, not a package) as module ``name``.
    Returns (module, restore): restore() puts back the sys.path the script extended."""
    import importlib.util
    import sys

    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.path[:] = saved
        raise

    def restore():
        sys.path[:] = saved

    return module, restore
