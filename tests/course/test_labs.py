"""The nbgrader labs (labs/): structure checks that cost nothing to run.

The grading itself (solutions earn every autograded point, the untouched release almost none)
is `make labs-check` (zg_course/check.py), run by .ci/run; it needs nbgrader and a few
minutes. These tests read the source notebooks as JSON: every lab has solution markers, graded
test cells with points and hidden tests, a hand-graded question, and nbgrader metadata nbgrader
accepts. The metadata checks need nbgrader's own validator and are skipped without it (the
modern environment does not install nbgrader).
"""

import importlib.util
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import zg
import zg_course.check
import zg_course.wrong

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "labs"
SOURCES = sorted(p for p in (LABS / "source").glob("*/*.ipynb") if p.stem == p.parent.name)
HAVE_NBGRADER = importlib.util.find_spec("nbgrader") is not None


def cells(path):
    return json.loads(path.read_text())["cells"]


def grade_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def text(cell):
    return "".join(cell["source"])


def test_there_are_at_least_six_labs_in_the_standard_layout():
    assert len(SOURCES) >= 6, (
        f"expected >= 6 labs as labs/source/<lab>/<lab>.ipynb, found {len(SOURCES)}"
    )
    config = (LABS / "nbgrader_config.py").read_text()
    assert "CourseDirectory.root" in config and "course_id" in config
    readme = (LABS / "README.md").read_text()
    for path in SOURCES:
        assert path.stem in readme, f"labs/README.md does not describe {path.stem}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_lab_has_solutions_points_hidden_tests_and_a_hand_graded_question(path):
    auto_points = manual_points = hidden = 0
    ids = []
    for cell in cells(path):
        meta, src = grade_meta(cell), text(cell)
        if meta:
            ids.append(meta["grade_id"])
            assert meta.get("schema_version") == 3, (
                f"{path.stem}/{meta['grade_id']}: schema_version 3"
            )
        begin, end = src.count("### BEGIN SOLUTION"), src.count("### END SOLUTION")
        assert begin == end, f"{path.stem}/{meta.get('grade_id')}: unbalanced solution markers"
        if begin:
            assert cell["cell_type"] == "code" and meta.get("solution") and not meta.get("grade"), (
                f"{path.stem}: a cell with solution markers must be an (ungraded) solution cell"
            )
        if meta.get("grade") and cell["cell_type"] == "code":
            assert not meta.get("solution") and meta.get("locked"), (
                f"{path.stem}/{meta['grade_id']}"
            )
            assert meta.get("points", 0) > 0, (
                f"{path.stem}/{meta['grade_id']}: a test cell without points"
            )
            auto_points += meta["points"]
            has_hidden = "### BEGIN HIDDEN TESTS" in src
            assert has_hidden == ("### END HIDDEN TESTS" in src), f"{path.stem}/{meta['grade_id']}"
            hidden += has_hidden
            assert "assert" in src, (
                f"{path.stem}/{meta['grade_id']}: a test cell that asserts nothing"
            )
        if meta.get("grade") and cell["cell_type"] == "markdown":
            assert meta.get("solution") and meta.get("points", 0) > 0, (
                f"{path.stem}/{meta['grade_id']}"
            )
            manual_points += meta["points"]
    assert sum("### BEGIN SOLUTION" in text(c) for c in cells(path)) >= 2, (
        f"{path.stem}: fewer than 2 exercises"
    )
    assert auto_points > 0 and hidden > 0 and manual_points > 0, (
        path.stem,
        auto_points,
        hidden,
        manual_points,
    )
    assert len(ids) == len(set(ids)), f"{path.stem}: duplicate grade_id"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_exercise_is_tested_and_states_its_time(path):
    """Each solution defines a function some test cell calls (so an untouched stub fails), and
    the lab says how long it takes and what it needs."""
    nb = cells(path)
    intro = text(nb[0])
    assert re.search(r"\*\*Time:\*\* about \d+ minutes", intro), f"{path.stem}: no **Time:** line"
    assert "**Prerequisites:**" in intro, f"{path.stem}: no **Prerequisites:** line"
    tests = "\n".join(
        text(c) for c in nb if grade_meta(c).get("grade") and c["cell_type"] == "code"
    )
    for cell in nb:
        if "### BEGIN SOLUTION" not in text(cell):
            continue
        for name in re.findall(r"^def (\w+)\(", text(cell), flags=re.M):
            assert re.search(rf"\b{name}\b", tests), f"{path.stem}: no test cell uses {name}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_source_notebooks_are_stored_without_outputs(path):
    for cell in cells(path):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.stem


@pytest.mark.slow
@pytest.mark.skipif(
    not HAVE_NBGRADER,
    reason="nbgrader is not installed (it is pinned in the "
    "reference env only; the modern env does not run the labs)",
)
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_nbgrader_accepts_the_metadata_and_strips_solutions(path):
    import nbformat
    from nbgrader.preprocessors import CheckCellMetadata, ClearHiddenTests, ClearSolutions

    nb = nbformat.read(str(path), as_version=4)
    resources = {}
    for pre in (CheckCellMetadata(), ClearSolutions(), ClearHiddenTests()):
        nb, resources = pre.preprocess(nb, resources)
    released = "\n".join(c.source for c in nb.cells)
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert released.count("raise NotImplementedError()") >= 2, path.stem


def test_labs_check_and_release_are_wired_into_make_and_ci():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^labs:", makefile, flags=re.M) and re.search(
        r"^labs-check:", makefile, flags=re.M
    )
    assert "make labs-check" in (ROOT / ".ci" / "run").read_text()
    ignored = (ROOT / ".gitignore").read_text()
    for path in ("labs/release/", "labs/gradebook.db", "labs/submitted/", "labs/autograded/"):
        assert path in ignored, f"{path} must be gitignored"


@pytest.mark.skipif(
    not HAVE_NBGRADER,
    reason="nbgrader is not installed (it is pinned in the "
    "reference env only; the modern env does not run the labs)",
)
def test_nbgrader_extensions_are_installed_and_enabled_for_jupyterlab():
    """What `make lab` loads: the prebuilt lab extension and the four server extensions, as
    `jupyter labextension list` / `jupyter server extension list` report them (read from the
    files those commands read, without starting Jupyter)."""
    prefix = Path(sys.prefix)
    assert (prefix / "share/jupyter/labextensions/@jupyter/nbgrader/package.json").is_file(), (
        "nbgrader's JupyterLab extension is not installed in this environment"
    )
    config = json.loads((prefix / "etc/jupyter/jupyter_server_config.d/nbgrader.json").read_text())
    enabled = config["ServerApp"]["jpserver_extensions"]
    for name in ("formgrader", "validate_assignment", "assignment_list", "course_list"):
        assert enabled.get(f"nbgrader.server_extensions.{name}") is True, name
    disabled = prefix / "etc/jupyter/labconfig/page_config.json"
    if disabled.is_file():
        off = json.loads(disabled.read_text()).get("disabledExtensions", {})
        assert not any(k.startswith("@jupyter/nbgrader") and v for k, v in off.items()), off


def test_every_wrong_solution_names_a_real_cell_and_part():
    """labs/wrong/: each file's header names its lab and the solution cell it replaces; its
    part (what `make labs-wrong` grades) is read from the lab's notebook."""
    files = sorted((LABS / "wrong").glob("*.py"))
    assert len(files) >= 8, files
    for path in files:
        wrong = zg_course.wrong.read_wrong(path)
        source = LABS / "source" / wrong["lab"] / f"{wrong['lab']}.ipynb"
        assert source.is_file(), (path.name, wrong["lab"])
        zg_course.wrong.submission(source, wrong)  # raises on an unknown cell or part
        assert wrong["code"].strip() and wrong["why"], path.name
    assert "make labs-variants" in (ROOT / ".ci" / "run").read_text()  # labs-wrong in one pass


@pytest.mark.parametrize(
    "name",
    [
        "lab1_numpy_unique",
        "lab1_tolist_set",
        "lab5_out_edges",
        "lab8_loss_item",
        "lab6_shrink_over_workers",
        "lab4_calls_reference",
        "lab4_uses_overflow_poll",
        "lab5_calls_local_coverage",
        "lab7_calls_pair_coverage",
        "lab2_last_write_wins",
        "lab3_calls_memory_model",
        "lab8_calls_count_launches",
    ],
)
def test_a_few_wrong_solutions_lose_their_points_without_nbgrader(name):
    """The quick version of `make labs-wrong`: the lab's cells run in this process with one
    cell replaced by a wrong solution; its part earns at most half its points."""
    wrong = zg_course.wrong.read_wrong(LABS / "wrong" / f"{name}.py")
    scores = zg_course.wrong.grade_in_process(
        LABS / "source" / wrong["lab"] / f"{wrong['lab']}.ipynb", wrong
    )
    earned, total = sum(s for s, _ in scores.values()), sum(p for _, p in scores.values())
    assert total > 0 and set(scores) == set(wrong["part"]), scores
    assert earned <= total / 2, (name, scores)


def marking_notes_problems(lab, lab_cells):
    """What is missing from the hand-graded answers of one lab: each needs a model answer and
    ``**Marking notes (N points).**`` with N its points."""
    problems = []
    for cell in lab_cells:
        meta = grade_meta(cell)
        if not (meta.get("grade") and meta.get("solution") and cell["cell_type"] == "markdown"):
            continue
        found = re.search(r"\*\*Marking notes \((\d+(?:\.\d+)?) points?\)\.\*\*", text(cell))
        if "**Model answer.**" not in text(cell):
            problems.append(f"{lab}/{meta['grade_id']}: no **Model answer.**")
        if not found:
            problems.append(f"{lab}/{meta['grade_id']}: no **Marking notes (N points).**")
        elif float(found.group(1)) != float(meta.get("points", 0)):
            problems.append(
                f"{lab}/{meta['grade_id']}: marking notes for {found.group(1)} points, "
                f"the cell has {meta.get('points')}"
            )
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_hand_graded_answer_has_marking_notes(path):
    assert marking_notes_problems(path.stem, cells(path)) == []


def test_marking_notes_check_finds_a_cell_without_notes():
    meta = {"nbgrader": {"grade": True, "solution": True, "grade_id": "q", "points": 3}}
    bare = {"cell_type": "markdown", "metadata": meta, "source": ["**Model answer.** Yes."]}
    assert marking_notes_problems("lab", [bare]) == ["lab/q: no **Marking notes (N points).**"]
    wrong_points = dict(
        bare, source=["**Model answer.** Yes.\n\n**Marking notes (2 points).** 2: yes."]
    )
    assert "notes for 2 points" in marking_notes_problems("lab", [wrong_points])[0]
    right = dict(bare, source=["**Model answer.** Yes.\n\n**Marking notes (3 points).** 3: yes."])
    assert marking_notes_problems("lab", [right]) == []


# ----------------------------------------------------------------------------- write it, don't call it


def test_forbid_turns_a_function_off_however_it_was_reached_and_restores_it():
    import zg.step
    import zg_course.labs
    from zg_course.labs import ForbiddenCall, forbid, rewind_loop

    alias = rewind_loop
    guard = zg.step.OverflowGuard(2, torch.device("cpu"))
    with forbid(zg_course.labs.rewind_loop, zg.step.OverflowPoll, lab="Lab 4"):
        for call in (
            lambda: alias(None, 0, 1, guard, 1, None),
            lambda: zg_course.labs.rewind_loop(None, 0, 1, guard, 1, None),
            lambda: zg.step.OverflowPoll(guard, 1, 0, 1),
        ):
            with pytest.raises(ForbiddenCall, match="Lab 4 asks you to write this yourself"):
                call()
    # Restored, also after an error inside the block.
    with pytest.raises(ZeroDivisionError), forbid(rewind_loop):
        raise ZeroDivisionError("inside the block")
    out = rewind_loop(lambda b: torch.tensor(0.0), 0, 3, guard, 2, lambda first: None)
    assert out.executed == 3 and zg.step.OverflowPoll(guard, 1, 0, 1).polls == 0


def test_no_setup_cell_hands_out_what_its_lab_asks_for():
    """A setup cell imports no kit function that computes what the lab asks the student to
    write; every lab in the table holds its references inside the student's functions from the
    setup on (zg_course.labs.hold_references), naming functions the lab really asks for, and Lab 4's
    tests also turn the kit's loop off around the student's (zg_course.labs.forbid)."""
    import zg_course.labs

    table = zg_course.labs._lab_references()
    for lab in sorted((LABS / "source").iterdir()):
        number = int(lab.name[:2])
        if number not in table:
            continue
        names, targets = table[number]
        cells = json.loads((lab / f"{lab.name}.ipynb").read_text())["cells"]
        setup = text(next(c for c in cells if grade_meta(c).get("grade_id") == "setup"))
        imported = {n.strip() for g in re.findall(r"import ([\w, ]+)", setup) for n in g.split(",")}
        given = imported & {t.__name__ for t in targets}
        assert not given, f"{lab.name}'s setup cell imports {given}"
        solutions = "".join(text(c) for c in cells if grade_meta(c).get("solution"))
        for name in names:
            assert f"def {name}(" in solutions, f"{lab.name} asks for no function {name}"
        tests = [text(c) for c in cells if grade_meta(c).get("grade")]
        if number == 4:
            calls = [t for t in tests if "train_with_rewind(" in t]
            assert calls and all("zg_course.labs.forbid(" in t for t in calls), lab.name
        assert f"zg_course.labs.hold_references(globals(), {number})" in setup, lab.name


def test_held_references_work_for_the_tests_and_refuse_inside_the_students_function(
    labs_held_then_restored,
):
    import zg_course.labs
    from zg import grappa
    from zg_course.labs import ForbiddenCall

    g = zg.datasets.csbm(80, avg_degree=4, num_classes=3, feat_dim=4, seed=0)
    part = grappa.partition(g, num_parts=2, method="random", seed=0)
    namespace = {}
    zg_course.labs.hold_references(namespace, 5)
    expected = grappa.coverage(g, part, hops=2)  # the lab's own call: as before

    def graph_coverage(g, part, hops, super_epoch=0):
        return helper(g, part, hops)

    def helper(g, part, hops):  # a helper of the student's: still inside their function
        return grappa.coverage(g, part, hops)

    namespace["graph_coverage"] = graph_coverage
    with pytest.raises(
        ForbiddenCall, match=r"Lab 5 .* zg.grappa.coverage.coverage \(from graph_coverage\)"
    ):
        graph_coverage(g, part, 2)
    zg_course.labs.hold_references(namespace, 5)  # the lab run again in one process: still one hold
    assert torch.equal(grappa.coverage(g, part, hops=2), expected)


def test_every_lab_of_the_table_can_hold_its_references(labs_held_then_restored):
    """hold_references takes every lab of the table (a closure, which forbid cannot hold, would
    raise in the lab's setup cell), and a held function still works outside the student's."""
    import zg_course.labs
    from zg_course.labs import ForbiddenCall

    # an optimizer made first: torch.optim then wraps DeviceSGD.step once more (a closure)
    zg.optim.DeviceSGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    for lab in zg_course.labs._lab_references():
        assert zg_course.labs.hold_references({}, lab)
    namespace = {}
    zg_course.labs.hold_references(namespace, 4)
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.ones(3)

    def gated_sgd_(params, lr, apply):
        zg.optim.DeviceSGD(params, lr=lr).step(apply=apply)

    namespace["gated_sgd_"] = gated_sgd_
    with pytest.raises(
        ForbiddenCall, match=r"Lab 4 .* zg.optim.DeviceSGD.step \(from gated_sgd_\)"
    ):
        gated_sgd_([w], 0.5, torch.tensor(True))
    zg.optim.DeviceSGD([w], lr=0.5).step(apply=torch.tensor(True))  # the kit's own use: as before
    assert torch.equal(w.detach(), torch.full((3,), 0.5))


def test_first_write_wins_keeps_the_first_of_several_writes_to_one_index():
    """zg_course.labs.FirstWriteWins: scatter_, index_put_ (x[i] = v) and index_copy_ keep the first of
    duplicate writes instead of the CPU's last; reductions and duplicate-free writes are as
    before."""
    from zg_course.labs import FirstWriteWins

    index, values = torch.tensor([1, 3, 1, 3, 0]), torch.tensor([10, 20, 30, 40, 50])
    plain = torch.zeros(4, dtype=torch.int64).scatter_(0, index, values)
    assert plain.tolist() == [50, 30, 0, 40]  # the CPU: the last write stays
    with FirstWriteWins() as mode:
        scattered = torch.zeros(4, dtype=torch.int64).scatter_(0, index, values)
        assert scattered.tolist() == [50, 10, 0, 20]
        put = torch.zeros(4, dtype=torch.int64)
        put[index] = values
        assert put.tolist() == [50, 10, 0, 20]
        copied = torch.zeros(4, dtype=torch.int64).index_copy_(0, index, values)
        assert copied.tolist() == [50, 10, 0, 20]
        two = torch.zeros(2, 4, dtype=torch.int64)
        rows = two.scatter_(1, index[:4].repeat(2, 1), values[:4].repeat(2, 1))
        assert rows.tolist() == [[0, 10, 0, 20]] * 2
        least = torch.full((4,), 99).scatter_reduce_(0, index, values, "amin")
        assert least.tolist() == [50, 10, 99, 20]
        added = torch.zeros(4, dtype=torch.int64).index_add_(0, index, values)
        assert added.tolist() == [50, 40, 0, 60]
        mask = torch.tensor([True, False, True, False])
        masked = torch.zeros(4, dtype=torch.int64)
        masked[mask] = torch.tensor([7, 8])
        assert masked.tolist() == [7, 0, 8, 0]
    assert mode.flipped == 5


@pytest.mark.slow
def test_a_hook_that_calls_the_kits_hook_is_refused_on_the_workers(tmp_path):
    """hook_on_workers holds zg_course.hook.estimator_hook while the student's hook runs on the
    workers: handing the work to it raises ForbiddenCall in the caller."""
    import zg_course.labs

    # Defined in a real file, so inspect.getsource finds it (as it does in a notebook cell).
    path = tmp_path / "calls_the_kit.py"
    path.write_text(
        textwrap.dedent(
            """
            def calls_the_kit(state, bucket):
                from zg_course.hook import HookState, estimator_hook

                kit = HookState(state.ledger)
                kit.scale = state.scale
                return estimator_hook(kit, bucket)
            """
        )
    )
    spec = importlib.util.spec_from_file_location("calls_the_kit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(
        zg_course.labs.ForbiddenCall, match="do not call zg_course.hook.estimator_hook"
    ):
        zg_course.labs.hook_on_workers(module.calls_the_kit, [0.3, 0.9], timeout=30.0)


def test_graded_against_stops_a_kernel_with_another_kit_version(monkeypatch):
    import zg
    import zg_course.labs

    assert zg_course.labs.graded_against(zg.__version__) == zg.__version__
    monkeypatch.delenv(zg_course.labs.ANY_VERSION_ENV, raising=False)
    with pytest.raises(
        zg_course.labs.LabVersionMismatch, match=r"released with zg 0\.0\.1.*runs zg "
    ):
        zg_course.labs.graded_against("0.0.1")
    monkeypatch.setenv(zg_course.labs.ANY_VERSION_ENV, "1")
    with pytest.warns(UserWarning, match="running anyway"):
        assert zg_course.labs.graded_against("0.0.1") == zg.__version__
    with pytest.raises(TypeError, match="version must be"):
        zg_course.labs.graded_against(3)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_lab_records_the_kit_version_it_grades_against(path):
    """Each graded lab's setup cell calls zg_course.labs.graded_against with the kit's version: bumping
    the version means checking the labs against it (Lab 0 reports the version instead)."""
    import zg

    if path.parent.name == "00_setup":
        pytest.skip("Lab 0 checks the environment, zg's presence included")
    setup = next(c for c in cells(path) if grade_meta(c).get("grade_id") == "setup")
    assert f'zg_course.labs.graded_against("{zg.__version__}")' in text(setup), path.name


def test_the_package_carries_cora():
    """zg/_bundled/cora.npz (in the wheel) is the bundled data file itself."""
    import zg

    bundled = Path(zg.__file__).parent / "_bundled" / "cora.npz"
    assert bundled.read_bytes() == (ROOT / "data" / "cora.npz").read_bytes()


def test_the_kit_has_one_version_with_a_changelog_entry():
    """pyproject, zg.__version__ and CHANGELOG.md's newest released section name the same
    version (an "Unreleased" section may sit above it)."""
    import tomllib

    import zg

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == zg.__version__
    sections = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    sections = sections[1:] if sections[:1] == ["Unreleased"] else sections
    assert sections and sections[0] == zg.__version__, sections[:3]


def test_every_lab_header_states_its_measured_time():
    """The header's "executing the notebook takes about N s of CPU" is labs/timings.json's
    measurement (written by `python -m zg_course.check --timings labs/timings.json`), never typed."""
    timings = json.loads((LABS / "timings.json").read_text())
    assert timings["machine"] and "zg_course.check --timings" in timings["what"]
    for path in SOURCES:
        header = text(cells(path)[0])
        found = zg_course.check.TIME_PHRASE.search(header)
        assert found, f"{path.stem}: the header does not say how long executing it takes"
        measured = timings["seconds"][path.stem]
        assert int(found.group(2)) == max(1, round(measured)), (path.stem, measured)


def test_no_lab_but_lab_0_names_dgl_so_every_lab_runs_without_it():
    """.ci/run executes only Lab 0 in the modern env (no DGL); the other labs run there too as
    long as none of them imports DGL (`make report-modern` executes all ten)."""
    for path in sorted((ROOT / "labs" / "source").glob("*/*.ipynb")):
        nb = json.loads(path.read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        if path.parent.name == "00_setup":
            assert "import dgl" not in code and 'import_module("dgl")' in code  # optional, guarded
        else:
            assert "dgl" not in code.lower(), f"{path.name} names DGL"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not HAVE_NBGRADER,
    reason="nbgrader is not installed (it is pinned in the "
    "reference env only; the modern env does not run the labs)",
)
def test_feedback_shows_no_hidden_test_and_the_check_sees_one_that_does(tmp_path):
    """`nbgrader generate_feedback` with the course's config (labs/nbgrader_config.py): the
    hidden tests' lines are in neither the cells nor the tracebacks a student reads. With
    nbgrader's own feedback settings (the check's negative control) they are, and
    zg_course/check.py's feedback check names them."""
    import shutil

    lab = "00_setup"
    api, course, cleanup, _ = zg_course.check.nbgrader_workspace(LABS, str(tmp_path / "w"), "test")
    assert cleanup is None
    assert api.generate_assignment(lab, force=True, create=True)["success"]
    folder = course / "submitted" / "untouched" / lab
    folder.mkdir(parents=True)
    shutil.copy2(course / "release" / lab / f"{lab}.ipynb", folder / f"{lab}.ipynb")
    assert api.autograde(lab, "untouched", force=True, create=True)["success"]
    assert zg_course.check.feedback_leaks(api, course, lab, "untouched") == []
    page = (course / "feedback" / "untouched" / lab / f"{lab}.html").read_text()
    assert "NameError: name &#39;report&#39; is not defined" in page or (
        "NameError: name 'report' is not defined" in page
    )  # what the failing test said is kept
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades

    config = api.config.copy()
    config.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor]
    plain = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    leaks = zg_course.check.feedback_leaks(plain, course, lab, "untouched")
    assert len(leaks) == 1 and "hidden line(s)" in leaks[0], leaks
