"""The route through the code: the walks of docs/route.md, resolved in the live code.

:data:`WALKS` is the one place the route is written down. Each walk is a call tree as text:
one import path per line (what ``import`` and ``getattr`` reach from ``zg``), indented two
spaces under the listed function it runs inside, in the order the calls happen; ``# words``
after a name is a note printed beside it. Calls in between may be left out (``nn.Module``'s
``__call__``, a helper): a walk is the route a reader follows, not every frame.
``tools/render_docs.py`` fills each ``zg:route`` block of the docs from it,

    <!-- zg:route batch -->
    (a table, one row per step: its import path, the step it runs under, `file:line` of its
    ``def`` and the first sentence of its docstring)
    <!-- /zg:route -->

so the line numbers come from ``inspect``, never from a keyboard: when the code moves,
``python tools/render_docs.py --check`` says the block is stale, and when a listed function
no longer exists it names the walk and the function. Then edit :data:`WALKS` (a renamed or
split function) and run ``python tools/render_docs.py``. ``tests/docs/test_route.py`` also
runs one static batch and one Grappa epoch and checks that every walk is the calls the code
really makes, in order, each inside the step it is listed under.

``modules`` blocks (``<!-- zg:modules -->``, docs/layout.md) list every module of the package
with the first sentence of its docstring, the same way.
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

# One training batch (mode="static", the default kernel="torch": the code a GPU runs and the
# notebooks show), from the loop to the layers' aggregation.
BATCH = """
zg.Engine.train_epoch                        # the loop: one call per batch, observers around it
  zg.Engine._train_batch
    zg.Engine._static_step                   # mode="graph" captures this call and replays it
      zg.EnvelopeSampler.sample_static       # stages "sample" then "compact", hop by hop
        zg.EnvelopeSampler._sample_hop       # the "sample" stage of one hop
          zg.sampling.sample_neighbors       # Floyd's rounds (or draws) in fixed shape
        zg.EnvelopeSampler._compact_hop      # the "compact" stage: dedupe and relabel
      zg.step.train_step
        zg.models.SAGE.forward
          zg.models.SAGEConv.forward         # one layer: its formula
            zg.kernels.aggregate.destination_rows_and_projected_mean
              zg.kernels.aggregate.weighted_neighbour_sum
                zg.kernels.aggregate.gather_sum    # the torch reference: h[nbr] weighted, summed
"""

# The same batch with kernel="fused" (the CPU's numba kernels): where it leaves the torch ops.
BATCH_FUSED = """
zg.Engine._static_step
  zg.EnvelopeSampler.sample_static
    zg.EnvelopeSampler._sample_static_fused
      zg.kernels.sampling.sample_fused       # every hop's sample and compact in one compiled call
  zg.step.train_step
    zg.kernels.aggregate.weighted_neighbour_sum
      zg.kernels.aggregate.neighbour_sum     # embedding_bag forward, the CSR backward (numba)
"""

# One Grappa epoch, from the entry point to the gradient exchange.
GRAPPA = """
zg.grappa.train                              # the options of one run
  zg.grappa.train_many
    zg.grappa.train.prepare_many             # every check, before any process starts
    zg.grappa.train.launch_prepared
      zg.grappa.launch.spawn                 # P fresh processes
        zg.grappa.launch._entry              # in each worker process: join the process group
          zg.grappa.train._run_many
            zg.grappa.worker.run_worker
              zg.grappa.worker._run_worker   # the epoch loop
                zg.grappa.worker._Worker.__init__
                  zg.grappa.roles.Role.exchange  # the one exchange, built once per worker
                zg.grappa.worker._Worker.enter
                  zg.grappa.worker._Worker._engine     # the worker's zg.Engine
                zg.grappa.worker._Worker.train_epoch
                  zg.Engine.train_epoch      # the batch walk above, on the local graph
                    zg.Engine._train_batch   # step_shapes="envelope" goes through _static_step
                      zg.step.train_step     # after backward: StepHooks.reduce
                        zg.grappa.exchange.GradientExchange.__call__  # scale, one all_reduce SUM
"""

WALKS = {"batch": BATCH, "batch_fused": BATCH_FUSED, "grappa": GRAPPA}

RERUN = "python tools/render_docs.py"


class Step(NamedTuple):
    """One line of a walk: its depth in the call tree, import path, note, and its caller's
    index in the walk (None for the first)."""

    depth: int
    path: str
    note: str
    parent: int | None


def parse(walk: str, name: str = "walk") -> list[Step]:
    """The steps of ``walk`` (text as in :data:`WALKS`); ValueError on a bad indentation."""
    steps: list[Step] = []
    stack: list[int] = []  # the index of the last step at each depth
    for line in textwrap.dedent(walk).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        path, _, note = line.strip().partition("#")
        path, depth = path.strip(), indent // 2
        if steps and depth == 0:
            raise ValueError(f"walk {name}: {path} is a second root (one first function per walk)")
        if indent % 2 or depth > len(stack):
            raise ValueError(
                f"walk {name}: {path} is indented {indent} spaces; a step is indented two "
                "spaces more than the function that calls it"
            )
        del stack[depth:]
        steps.append(Step(depth, path, note.strip(), stack[-1] if stack else None))
        stack.append(len(steps) - 1)
    if not steps:
        raise ValueError(f"walk {name} is empty")
    return steps


def resolve(path: str) -> Any:
    """The object an import path names: attributes from the top package down (``zg.Engine``,
    ``zg.grappa.train``, the function), importing a submodule where no attribute has its name,
    else the longest importable module and attributes from there (``zg.grappa.train.train_many``,
    in the module ``zg.grappa.train``). ValueError naming the missing part."""
    parts = path.split(".")
    if not all(p.isidentifier() for p in parts):
        raise ValueError(f"{path!r} is not an import path")
    try:
        obj: Any = importlib.import_module(parts[0])
        for i, part in enumerate(parts[1:], 1):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif inspect.ismodule(obj):
                obj = importlib.import_module(".".join(parts[: i + 1]))
            else:
                raise AttributeError(part)
        return obj
    except (ImportError, AttributeError):
        pass
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            if not hasattr(obj, part):
                where = ".".join(parts[: parts.index(part, end)])
                raise ValueError(f"{path} does not exist ({where} has no {part!r})")
            obj = getattr(obj, part)
        return obj
    raise ValueError(f"{path} does not exist (no module {parts[0]!r})")


def unwrap(obj: Any) -> Any:
    """The function behind a property, staticmethod, partial or decorator. (A function a lab
    holds, ``zg_course.labs.hold_references``, runs a stand-in's code for the rest of the process; the
    stand-in is compiled at the original's file and first line, so its source and location are
    the original's, and the route shows them.)"""
    if isinstance(obj, property):
        obj = obj.fget
    obj = getattr(obj, "__func__", obj)
    return inspect.unwrap(obj)


def package_root() -> Path:
    """The folder holding the imported ``zg`` (the checkout the locations are relative to)."""
    import zg

    return Path(zg.__file__).resolve().parent.parent


def location(obj: Any) -> tuple[str, int]:
    """("zg/engine.py", line of the ``def``, or of its first decorator) of a kit object."""
    target = unwrap(obj)
    try:
        file = Path(inspect.getsourcefile(target)).resolve()
        line = max(1, inspect.getsourcelines(target)[1])
    except (TypeError, OSError) as e:
        raise ValueError(f"no source for {target!r} ({e})") from None
    root = package_root()
    if not file.is_relative_to(root / "zg"):
        raise ValueError(f"{target!r} is defined in {file}, outside the kit's zg/")
    return file.relative_to(root).as_posix(), line


def defined_as(obj: Any) -> str:
    """``module.Qualname`` where ``obj`` is defined."""
    target = unwrap(obj)
    if inspect.ismodule(target):
        return target.__name__
    return f"{target.__module__}.{target.__qualname__}"


ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|obj|exc):`~?([^`]+)`")


def summary(obj: Any) -> str:
    """The first sentence of ``obj``'s own docstring (a method without one: its class's), as
    Markdown (reST roles and double backquotes become code spans), on one line."""
    target = unwrap(obj)
    doc = target.__doc__ if isinstance(target.__doc__, str) else None
    if not doc and "." in getattr(target, "__qualname__", ""):
        owner = inspect.getmodule(target)
        for part in target.__qualname__.split(".")[:-1]:
            owner = getattr(owner, part, None)
        doc = getattr(owner, "__doc__", None) if inspect.isclass(owner) else None
    if not doc:
        return ""
    paragraph = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    # The first sentence: up to a full stop followed by a space (not "e.g." or "i.e.").
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.\s", paragraph)
    sentence = paragraph[: end.start() + 1] if end else paragraph
    sentence = ROLE.sub(r"`\1`", sentence).replace("``", "`")
    return sentence.replace("|", "\\|")


def render_walk(name: str) -> str:
    """The body of a ``zg:route NAME`` block: the walk as a Markdown table, one row per step
    (its number, import path, caller, ``file:line`` and docstring's first sentence)."""
    if name not in WALKS:
        raise ValueError(f"no walk {name!r} (known: {', '.join(WALKS)}; see tools/route.py)")
    lines = [
        "| # | function | under | where | what it does |",
        "|---|---|---|---|---|",
    ]
    for i, step in enumerate(parse(WALKS[name], name), 1):
        try:
            obj = resolve(step.path)
            file, line = location(obj)
        except ValueError as e:
            raise ValueError(
                f"walk {name}: {e}. Edit WALKS in tools/route.py (renamed, moved or split?), "
                f"then run {RERUN}"
            ) from None
        function = f"`{step.path}`"
        qualname = getattr(unwrap(obj), "__qualname__", "")
        if not step.path.endswith("." + qualname):  # reached through a subclass or an alias
            function += f" (defined as `{defined_as(obj)}`)"
        what = summary(obj)
        if step.note:
            what += f" *{step.note}*" if what else f"*{step.note}*"
        caller = "" if step.parent is None else str(step.parent + 1)
        lines.append(f"| {i} | {function} | {caller} | `{file}:{line}` | {what} |")
    return "\n" + "\n".join(lines) + "\n"


def modules(root: Path | None = None) -> list[str]:
    """Every module of the package as a path ("zg/engine.py"), and every subpackage as its
    folder ("zg/grappa/"): what docs/layout.md lists."""
    root = package_root() if root is None else root
    found = []
    for file in sorted((root / "zg").rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        if "__pycache__" in rel:
            continue
        if file.name == "__init__.py":
            rel = rel[: -len("__init__.py")]
        found.append(rel)

    def tree_order(path: str) -> tuple:  # zg/ and its modules, then each subpackage's
        folder, _, name = path.rpartition("/")
        return (folder != "zg", folder, name)

    return sorted(found, key=tree_order)


def module_summary(path: str, root: Path | None = None) -> str:
    """The first sentence of a module's docstring (read, not imported), without a leading
    "zg.name: " that repeats the module's own name."""
    import ast

    root = package_root() if root is None else root
    file = root / path / "__init__.py" if path.endswith("/") else root / path
    doc = ast.get_docstring(ast.parse(file.read_text()))
    if not doc:
        return ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.\s", paragraph)
    sentence = paragraph[: end.start() + 1] if end else paragraph
    name = path.rstrip("/").removesuffix(".py").replace("/", ".")
    if sentence.startswith(f"{name}: "):  # "zg.datasets: where graphs come from."
        sentence = sentence[len(name) + 2 :]
        sentence = sentence[:1].upper() + sentence[1:]
    sentence = ROLE.sub(r"`\1`", sentence).replace("``", "`")
    return sentence.replace("|", "\\|")


def render_modules() -> str:
    """The body of a ``zg:modules`` block: one table row per module and subpackage."""
    lines = ["| module | what it holds (its docstring's first sentence) |", "|---|---|"]
    for path in modules():
        lines.append(f"| `{path}` | {module_summary(path)} |")
    return "\n" + "\n".join(lines) + "\n"
