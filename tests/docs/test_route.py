"""docs/route.md and docs/layout.md are rendered from the code, and the route is the real one.

The walks of docs/route.md are written once, in ``WALKS`` of ``tools/route.py``; their
``file:line`` anchors and summaries are rendered by ``tools/render_docs.py`` (``zg:route``
blocks), as the result numbers are. Here: the rendered pages are current (a moved line or a
missing function fails with what to run); the walks are the calls the code really makes, in
order, each inside the step it is listed under: one static batch (observed as the engine's
frame-depth test in tests/core/test_engine.py observes the chain, from the frames of every
call) and, marked slow, one Grappa epoch on two worker processes (the workers' calls recorded
by tests/docs/route_plugin.py); and docs/layout.md names every module of ``zg/`` and no module
that does not exist."""

import functools
import io
import json
import os
import re
import sys
from pathlib import Path

import pytest
from graphs import tiny

import zg
from tests.script_loader import load_script
from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
render_docs, _restore = load_script(ROOT / "tools" / "render_docs.py", "render_docs")
_restore()
route = render_docs.route
PAGES = [ROOT / "docs" / "route.md", ROOT / "docs" / "layout.md"]
FIX = "edit WALKS in tools/route.py if a function was renamed or split, then run python tools/render_docs.py"


def check(paths) -> tuple[int, str]:
    out = io.StringIO()
    return render_docs.run(list(paths), results.RESULTS_DIR, check=True, out=out), out.getvalue()


# ----------------------------------------------------------------------------- rendered, current


def test_the_route_and_the_module_table_are_current():
    status, out = check(PAGES)
    assert status == 0, f"the code moved since the pages were rendered; {FIX}:\n{out}"


def test_every_walk_is_rendered_on_the_route_page():
    text = (ROOT / "docs" / "route.md").read_text()
    shown = {m["args"].strip() for m in render_docs.BLOCK.finditer(text) if m["kind"] == "route"}
    assert shown == set(route.WALKS), f"walks in tools/route.py vs blocks in docs/route.md: {shown}"
    assert "<!-- zg:modules -->" in (ROOT / "docs" / "layout.md").read_text()


def test_a_moved_line_makes_the_page_stale(tmp_path):
    page = tmp_path / "route.md"
    text = (ROOT / "docs" / "route.md").read_text()
    moved = re.sub(r"`zg/engine\.py:(\d+)`", lambda m: f"`zg/engine.py:{int(m[1]) + 1}`", text)
    assert moved != text
    page.write_text(moved)
    status, out = check([page])
    assert status == 1, out
    assert "zg:route batch is stale (the code moved or changed" in out, out
    assert "run python tools/render_docs.py" in out, out


def test_a_function_that_no_longer_exists_is_named(tmp_path, monkeypatch):
    page = tmp_path / "route.md"
    page.write_text("<!-- zg:route batch -->\n<!-- /zg:route -->\n")
    walk = route.WALKS["batch"].rstrip() + "\n  zg.Engine._run\n"
    monkeypatch.setitem(route.WALKS, "batch", walk)
    status, out = check([page])
    assert status == 1, out
    assert "walk batch: zg.Engine._run does not exist (zg.Engine has no '_run')" in out, out
    assert "Edit WALKS in tools/route.py" in out and "python tools/render_docs.py" in out, out


@pytest.mark.parametrize(
    "walk, match",
    [
        ("zg.Engine.train_epoch\n   zg.Engine._train_batch", "indented 3 spaces"),
        ("zg.Engine.train_epoch\n    zg.Engine._train_batch", "indented 4 spaces"),
        ("zg.Engine.train_epoch\nzg.Engine.evaluate", "second root"),
        ("\n", "empty"),
    ],
)
def test_a_malformed_walk_is_refused_with_its_line(walk, match):
    with pytest.raises(ValueError, match=match):
        route.parse(walk, "test")


def test_an_import_path_resolves_to_what_a_reader_means():
    assert route.resolve("zg.grappa.train") is zg.grappa.train  # the function, not the module
    assert (
        route.resolve("zg.grappa.train.prepare_many") is sys.modules["zg.grappa.train"].prepare_many
    )
    assert route.resolve("zg.kernels.aggregate.gather_sum") is zg.kernels.aggregate.gather_sum
    with pytest.raises(ValueError, match="zg.Engine has no 'nothing'"):
        route.resolve("zg.Engine.nothing")
    with pytest.raises(ValueError, match="no module 'nonexistent'"):
        route.resolve("nonexistent.thing")


# ----------------------------------------------------------------------------- the real chain


def observed_calls(run) -> list[tuple]:
    """(process 0, code, codes of the frames below it) of every Python call while ``run()``
    runs in this process."""
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            below, f = [], frame.f_back
            while f is not None:
                below.append(f.f_code)
                f = f.f_back
            calls.append((0, frame.f_code, below))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def key_of(code) -> tuple[str, int]:
    """A function as (real path of its file, first line): the same in every process."""
    return os.path.realpath(code.co_filename), code.co_firstlineno


def code_of(path: str):
    target = route.unwrap(route.resolve(path))
    code = getattr(target, "__code__", None)
    assert code is not None, f"{path} is not a Python function: a walk step the test can observe"
    return code


def unmatched_step(steps, calls) -> str | None:
    """The first step not called after the step before it, inside the step it is listed under;
    None when every step was. ``calls``: (process, code or key, codes or keys below it), in
    the order they happened; process 0 is this one, and a step of another process counts as
    inside a step of this one (the process start is not a frame)."""
    keys = [key_of(code_of(s.path)) for s in steps]
    as_key = functools.cache(lambda c: c if isinstance(c, tuple) else key_of(c))
    at, matched = -1, []  # matched: the process each step was found in
    for step, key in zip(steps, keys):
        parent = None if step.parent is None else step.parent
        found = None
        for i in range(at + 1, len(calls)):
            process, code, below = calls[i]
            if as_key(code) != key:
                continue
            if parent is None or (matched[parent] == 0 and process != 0):
                found = i  # the parent started this process: its frames are not below
                break
            if matched[parent] == process and keys[parent] in {as_key(c) for c in below}:
                found = i
                break
        if found is None:
            under = "" if step.parent is None else f" inside {steps[step.parent].path}"
            return f"{step.path} was not called{under} after the steps before it"
        at = found
        matched.append(calls[found][0])
    return None


@pytest.mark.parametrize("walk, kernel", [("batch", "torch"), ("batch_fused", "fused")])
def test_the_batch_walks_are_the_calls_one_static_batch_makes(walk, kernel):
    """One static batch on the tiny graph: every step of the walk is called, inside the step
    it is listed under, in the walk's order."""
    if kernel == "fused" and not zg.kernels.available():
        pytest.skip("kernel='fused' needs numba")
    g = tiny()
    eng = zg.Engine(
        g,
        zg.models.SAGE(g.feat_dim, 16, g.num_classes, 2),
        [4, 4],
        64,
        "worst_case",
        mode="static",
        kernel=kernel,
        seed=0,
    )
    eng.observers = []
    calls = observed_calls(lambda: eng.train_epoch(max_batches=1))
    problem = unmatched_step(route.parse(route.WALKS[walk], walk), calls)
    assert problem is None, (
        f"walk {walk} of tools/route.py is not the route one static batch takes: {problem}. "
        f"Fix the walk to follow the code, then run python tools/render_docs.py"
    )


def test_the_chain_check_sees_a_wrong_order_and_a_wrong_caller():
    steps = route.parse(
        """
        zg.Engine.train_epoch
          zg.step.train_step
          zg.EnvelopeSampler.sample_static
        """
    )
    g = tiny()
    eng = zg.Engine(g, zg.models.SAGE(g.feat_dim, 8, g.num_classes, 2), [4, 4], 64, seed=0)
    eng.observers = []
    calls = observed_calls(lambda: eng.train_epoch(max_batches=1))
    assert "sample_static was not called" in unmatched_step(steps, calls)
    wrong_caller = route.parse(
        "zg.Engine.train_epoch\n  zg.step.train_step\n    zg.Engine._static_step"
    )
    assert "inside zg.step.train_step" in unmatched_step(wrong_caller, calls)


@pytest.mark.slow
def test_the_grappa_walk_is_the_calls_one_grappa_epoch_makes(tmp_path, monkeypatch):
    """One epoch of ``zg.grappa.train`` on two workers: the parent's steps are observed here, the
    workers' by a worker plugin (tests/docs/route_plugin.py) that records the walk's functions
    as they are called. Every step is called, in the walk's order, inside the step it is listed
    under (across the process start, only the order is checked)."""
    steps = route.parse(route.WALKS["grappa"], "grappa")
    functions = [key_of(code_of(s.path)) for s in steps]
    watch = tmp_path / "watch.json"
    watch.write_text(json.dumps({"functions": functions, "out": str(tmp_path)}))
    plugin = ROOT / "tests" / "docs" / "route_plugin.py"
    monkeypatch.setenv("ZG_GRAPPA_WORKER_PLUGIN", str(plugin))
    monkeypatch.setenv("ZG_ROUTE_WATCH", str(watch))
    g = tiny()
    calls = observed_calls(
        lambda: zg.grappa.train(
            g, workers=2, epochs=1, seed=0, method="random", progress=False, run_timeout=300
        )
    )
    for path in sorted(tmp_path.glob("calls-*.jsonl")):
        for line in path.read_text().splitlines():
            i, below = json.loads(line)
            calls.append((path.name, tuple(functions[i]), [tuple(functions[j]) for j in below]))
    assert any(isinstance(p, str) for p, _, _ in calls), "no worker ran the plugin"
    problem = unmatched_step(steps, calls)
    assert problem is None, (
        f"walk grappa of tools/route.py is not the route one Grappa epoch takes: {problem}. "
        "Fix the walk to follow the code, then run python tools/render_docs.py"
    )
    # The workers' frames are checked too: the hook runs inside the step, not where it is
    # registered.
    wrong = route.parse(
        "zg.grappa.worker.run_worker\n  zg.grappa.roles.Role.exchange\n    zg.grappa.exchange.GradientExchange.__call__"
    )
    assert "inside zg.grappa.roles.Role.exchange" in unmatched_step(wrong, calls)


# ----------------------------------------------------------------------------- every module


def module_paths_named(text: str) -> set[str]:
    """Every ``zg/...`` module or package path named in code spans or in the table."""
    return set(re.findall(r"(?<![\w./-])(zg/(?:[\w]+/)*(?:[\w]+\.py)?)(?=[`\s|:),.]|$)", text))


def test_layout_names_every_module_and_no_module_that_does_not_exist():
    text = (ROOT / "docs" / "layout.md").read_text()
    named = module_paths_named(text)
    modules = set(route.modules())
    missing = sorted(modules - named)
    assert not missing, f"docs/layout.md does not name these modules; {FIX}: {missing}"
    gone = sorted(p for p in named if not (ROOT / p).exists())
    assert not gone, f"docs/layout.md names modules that do not exist: {gone}"


def test_the_module_list_is_every_python_file_of_the_package():
    files = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "zg").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    as_listed = {p + "__init__.py" if p.endswith("/") else p for p in route.modules(ROOT)}
    assert as_listed == files
