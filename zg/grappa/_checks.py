"""Grappa's own argument checks (where a run writes), beside the kit's general ones in
:mod:`zg._checks`, re-exported here for the Grappa modules. Every error names the argument and
the problem."""

from __future__ import annotations

import os
from typing import Any

from .._checks import bool_arg, choice_arg, int_arg, output_file_arg, output_folder_arg, real_arg  # noqa: F401  (re-exported)
from ..graph import graph_arg  # noqa: F401  (re-exported)

# Where a run writes, and whether the writer creates missing folders on the way
# (zg/grappa/train.py: write_json and _save_checkpoint call os.makedirs; the model is saved
# with a plain torch.save into an existing folder).
OUTPUT_FIELDS_MAKE_FOLDERS = {"history_path": True, "model_path": False}
MAX_LAYERS = 64  # num_layers above is a typo, and [10] * num_layers must stay small
CHECKPOINT_FILE = "checkpoint.pt"  # the name zg.grappa.train gives the file in checkpoint_dir


def check_output_paths(
    history_path: Any | None = None,
    model_path: Any | None = None,
    checkpoint_dir: Any | None = None,
    *,
    inputs: Any = (),
) -> None:
    """Raise before training starts if a run could not write where its config says.

    Each argument is a :class:`~zg.grappa.TrainConfig` field (None: not written). Errors are
    ``TypeError`` (not a path) or ``ValueError`` naming the field, the path and the problem:
    a file path that is a directory, a folder that is a file, a missing folder (``model_path``
    only: the history and checkpoint writers create theirs), a folder that is not writable, or
    two fields naming the same file, or an output that is one of ``inputs`` (the files and
    folders the run reads: its config file, its dataset) or lies inside an input folder.
    Nothing is created or written.
    """
    files = {}
    for name, path in (("history_path", history_path), ("model_path", model_path)):
        if path is not None:
            files[name] = output_file_arg(path, name, make_parents=OUTPUT_FIELDS_MAKE_FOLDERS[name])
    if checkpoint_dir is not None:
        folder = output_folder_arg(checkpoint_dir, "checkpoint_dir")
        inside = folder / CHECKPOINT_FILE
        if inside.is_dir():
            raise ValueError(
                f"checkpoint_dir {str(folder)!r}: {str(inside)!r} is a directory, "
                "so no checkpoint can be written there"
            )
        files["checkpoint_dir"] = inside
    seen = {}
    for name, path in files.items():
        key = os.path.abspath(path)
        if key in seen:
            raise ValueError(
                f"{seen[key]} and {name} name the same file {key!r}; one would overwrite the other"
            )
        seen[key] = name
    sources = [os.path.realpath(p) for p in inputs if p is not None and os.path.exists(p)]
    outputs = list(files.items())
    if checkpoint_dir is not None:
        outputs.append(("checkpoint_dir", os.fspath(checkpoint_dir)))
    for name, path in outputs:
        target = os.path.realpath(path)
        for source in sources:
            inside = os.path.isdir(source) and os.path.commonpath([source, target]) == source
            if target == source or inside:
                raise ValueError(
                    f"{name} {os.fspath(path)!r} is the run's input {source!r} or lies inside it; "
                    "writing there would overwrite what the run reads. Choose another path"
                )
