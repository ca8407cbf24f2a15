"""Render CLAIMS.md from the headline metrics of bench/results/*.json, with a verdict per claim.

    python tools/claims.py            # write CLAIMS.md
    python tools/claims.py --check    # exit 1 if CLAIMS.md is not what the results give

A claim (tools/claims.toml) names the headline metrics ``(file, metric)`` it reads and a criterion; its verdict
follows from those numbers alone (:func:`verdict`): *reproduced*, *partly*, *not reproduced*,
*not shown* (a file or metric missing, a value null), *projected* (every metric read is a
projection: its ``where`` says so), or *asserted* (checked by a notebook's asserts every CI run).
Each row also names the kernel its figures' zg side ran (:func:`kernel_of`), as the result file
records it: the torch kernels (the default) or the compiled numba ones.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from zg.experiments import results
from zg.experiments.machine import machine_short


def _markdown_text():
    """tools/markdown_text.py (the renderers' one escaping rule), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "zg_markdown_text", Path(__file__).with_name("markdown_text.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Text read from a result file (a figure, its "where", a machine note) is escaped as text.
_cell = _markdown_text().cell


def text(value: object) -> str:
    return _cell(value, pipes=False)  # render() escapes "|" in every cell of a row


OUT = ROOT / "CLAIMS.md"
SPEC = Path(__file__).with_name("claims.toml")  # the claims, their metrics and criteria
RESULTS = results.RESULTS_DIR
VERDICTS = ("reproduced", "partly", "not reproduced", "not shown", "projected", "asserted")


def judge(m: dict, criterion, min_n: int = 1) -> str:
    """One metric against ["at_least" | "at_most", reproduced, partly]: reproduced if the value
    meets ``reproduced``, its spread (value -/+ std) still meets ``partly`` and it was measured
    over at least ``min_n`` runs; partly if the value meets ``partly``; else not reproduced."""
    op, rep, part = criterion
    if op not in ("at_least", "at_most"):
        raise ValueError(f"criterion must start with 'at_least' or 'at_most', got {op!r}")
    sign = 1.0 if op == "at_least" else -1.0
    v, low = sign * m["value"], sign * m["value"] - (m["std"] or 0.0)
    if v >= sign * rep and low >= sign * part and m["n"] >= min_n:
        return "reproduced"
    return "partly" if v >= sign * part else "not reproduced"


ORDER = ("reproduced", "partly", "not reproduced")


def verdict(
    metrics: list, criteria: list, of: str = "all", min_n: int = 1, cap: str | None = None
) -> str:
    """A claim's verdict from its metrics (None: missing) and one criterion per metric; a
    projected metric (its ``where`` starts with "projected") is shown, not judged. ``cap``: the
    best verdict the claim can get whatever its numbers (e.g. "partly" when the comparison is a
    stand-in for the paper's baseline)."""
    if not metrics or any(m is None or m["value"] is None for m in metrics):
        return "not shown"
    judged = [(m, c) for m, c in zip(metrics, criteria) if not m["where"].startswith("projected")]
    if not judged:
        return "projected"
    ranks = [ORDER.index(judge(m, c, min_n)) for m, c in judged]
    rank = min(ranks) if of == "max" else max(ranks)
    if cap is not None:
        rank = max(rank, ORDER.index(cap))
    return ORDER[rank]


def load_claims(path: Path = SPEC) -> list[dict]:
    """The claims of tools/claims.toml, each metric as (file, name, criterion)."""
    with open(path, "rb") as f:
        claims = tomllib.load(f)["claim"]
    for c in claims:
        c.setdefault("asserted", None)
        c.setdefault("of", "all")
        c.setdefault("min_n", 1)
        c.setdefault("cap", None)
        if c["cap"] is not None and (c["cap"] not in ORDER or not c.get("because")):
            raise ValueError(f"{c['claim']!r}: cap must be one of {ORDER}, with a because")
        c["metrics"] = [
            (m[0], m[1], m[2] if len(m) > 2 else c["criterion"]) for m in c.get("metrics", [])
        ]
    return claims


CLAIMS = load_claims()


def machine_label(note: dict, detail: dict | None = None) -> str:
    """ "2 cores, no GPU, 2026-12-01" (", busy: load 8.3 on 2 cores at the start" when the
    file's detail recorded such a load before the bench ran: zg.experiments.machine.busy)."""
    return machine_short(note, detail)


def lookup(c: dict, folder: Path = RESULTS, with_docs: bool = False):
    """[(file, metric or None, machine note or None)] for the claim's metrics (with_docs: each
    with its loaded result file, or None, as a fourth item)."""
    out = []
    for file, name, _ in c["metrics"]:
        path = Path(folder) / f"{file}.json"
        doc = results.load(path) if path.exists() else None
        m = next((x for x in doc["headline"] if x["name"] == name), None) if doc else None
        out.append((file, m, doc["machine"] if doc else None) + ((doc,) if with_docs else ()))
    return out


# The kernels, as a row names them: the torch kernels (every zg default, the only ones on a GPU)
# and the compiled numba kernels (kernel="auto" or "fused" on a CPU).
KERNEL_NAMES = {"torch": "torch", "fused": "numba"}
# What a metric's own "where" says ran (the benches write these: bench/_machine.kernel_phrase,
# bench/grappa_peer.py's "zg kernel='auto'"), checked in this order.
WHERE_KERNEL = [
    (re.compile(r"compiled numba kernels"), "fused"),
    (re.compile(r"torch kernels|torch path"), "torch"),
    (re.compile(r"kernel='(\w+)'"), None),  # the kernel asked for: what it ran is in settings
]


def kernel_of(doc: dict | None, m: dict | None) -> str:
    """The kernel metric ``m`` of result ``doc`` was measured with, as the file records it:
    "torch", "numba", "torch, numba" (a file of both whose metric does not say which), or
    "not recorded". Read from the metric's ``where`` when it names one, else the file's
    ``settings.kernel``; a result from a GPU ran the torch kernels, the only ones there."""
    if doc is None or m is None:
        return "not recorded"
    settings = doc["settings"]
    for pattern, kernel in WHERE_KERNEL:
        found = pattern.search(m["where"])
        if found is None:
            continue
        if kernel is None:  # asked for: "auto" is what the file says it resolved to
            asked = found.group(1)
            ran = (settings.get("zg_kernels_ran") or {}).get(asked) or [asked]
            kernel = ran[0] if len(ran) == 1 else asked
        return KERNEL_NAMES.get(kernel, kernel)
    recorded = settings.get("kernel")
    if isinstance(recorded, str):
        recorded = [recorded]
    if recorded:
        return ", ".join(KERNEL_NAMES.get(k, k) for k in recorded)
    if doc["machine"].get("cuda"):
        return "torch"
    return "not recorded"


def kernels_cell(found: list, names: list) -> str:
    """A row's kernel column: one name when every figure ran the same kernel, else each
    figure (file and metric) with its kernel."""
    kernels = [kernel_of(doc, m) for _, m, _, doc in found]
    if len(set(kernels)) == 1:
        return kernels[0]
    return "; ".join(f"{f} {name}: {k}" for (f, *_), name, k in zip(found, names, kernels))


def row(c: dict, folder: Path = RESULTS) -> list[str]:
    if c["asserted"]:
        kind = "projected" if c["asserted"] == "projected" else "asserted"
        return [
            c["claim"],
            c["paper"],
            c["asserted"] if kind == "asserted" else "-",
            c["where"],
            "each CI run",
            "-",
            kind,
        ]
    found = lookup(c, folder)
    ms, ks = [m for _, m, _ in found], [k for *_, k in c["metrics"]]
    v = verdict(ms, ks, c["of"], c["min_n"], c["cap"])
    free = verdict(ms, ks, c["of"])  # the numbers alone
    reasons = []
    if free in ORDER and verdict(ms, ks, c["of"], c["min_n"]) != free:
        reasons.append(f"fewer than {c['min_n']} runs")
    if c["cap"] is not None and free in ORDER and ORDER.index(free) < ORDER.index(c["cap"]):
        reasons.append(c["because"])
    if reasons:
        v += f" ({'; '.join(reasons)})"
    figs = "; ".join(
        f"`{f}` {name}: "
        + (
            text(results.fmt(m, near=crit[1:]))
            + (" (projected)" if m["where"].startswith("projected") else "")
            + f" [{text(m['where'])}]"
            if m
            else "not measured"
        )
        for (f, m, _), (_, name, crit) in zip(found, c["metrics"])
    )
    with_docs = lookup(c, folder, with_docs=True)
    machines = (
        "; ".join(
            dict.fromkeys(
                f"`{f}`: {text(machine_label(n, doc['detail']))}" for f, _, n, doc in with_docs if n
            )
        )
        or "-"
    )
    kernels = kernels_cell(with_docs, [n for _, n, _ in c["metrics"]])
    return [c["claim"], c["paper"], figs, c["where"], machines, text(kernels), v]


def render(folder: Path = RESULTS) -> str:
    lines = [
        "# Claims ledger",
        "",
        "Generated by `python tools/claims.py` from the headline metrics of `bench/results/*.json`; never edit it "
        "by hand (`tests/bench/test_claims.py` fails when it is stale). Papers: ZeroGNN "
        "([arXiv 2605.29346](https://arxiv.org/abs/2605.29346)), Grappa ([arXiv 2602.01872](https://arxiv.org/abs/2602.01872)). "
        "Each verdict follows from the kit's figures and the claim's criterion in `tools/claims.toml`: *reproduced* "
        "(a timing or accuracy figure only over at least 3 runs, and only against the paper's own kind of "
        "baseline; otherwise at most *partly*, with the reason), "
        "*partly*, *not reproduced*, *not shown* (no measurement), *projected* (a model's projection, not a "
        "measurement), *asserted* (a notebook's asserts check it every CI run; no committed number). The machine "
        "column is each file's machine note; the kernel column, the kernels the figures' zg side ran as the file "
        "records them: *torch* (the default, the only ones on a GPU), *numba* (the compiled kernels, "
        '`kernel="auto"` on a CPU). Figures: mean ± sample std (n = seeds or runs).',
        "",
    ]
    for section in dict.fromkeys(c["section"] for c in CLAIMS):
        lines += [
            f"## {section}",
            "",
            "| claim | paper's figure | kit's figure | where measured | machine | kernel | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in (c for c in CLAIMS if c["section"] == section):
            cells = row(c, folder)
            cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if CLAIMS.md is stale")
    args = ap.parse_args(argv)
    rendered = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != rendered:
            print(
                "CLAIMS.md is out of date with bench/results/*.json: run `python tools/claims.py`",
                file=sys.stderr,
            )
            return 1
        print("CLAIMS.md is up to date")
        return 0
    from zg._io import atomic_write  # the kit's one writer: a link kept, the mode kept

    atomic_write(OUT, lambda f: f.write(rendered), name="CLAIMS.md", text=True)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(CLAIMS)} claims)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
