"""Grappa's own argument checks (where a run writes), beside the kit's general ones in
:mod:`zg._checks`, re-exported here for the Grappa modules. Every error names the argument and
the problem."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from .._checks import (  # noqa: F401  (re-exported)
    bool_arg,
    choice_arg,
    input_conflict,
    int_arg,
    output_clash,
    output_file_arg,
    output_folder_arg,
    real_arg,
)
from ..graph import graph_arg  # noqa: F401  (re-exported)

# Where a run writes, and whether the writer creates missing folders on the way
# (zg/grappa/train.py: write_json and _save_checkpoint call os.makedirs; the model is saved
# with a plain torch.save into an existing folder).
OUTPUT_FIELDS_MAKE_FOLDERS = {"history_path": True, "model_path": False}
MAX_LAYERS = 64  # num_layers above is a typo, and [10] * num_layers must stay small
CHECKPOINT_FILE = "checkpoint.pt"  # the name zg.grappa.train gives the file in checkpoint_dir


@contextlib.contextmanager
def blames(
    field: str, kinds: tuple[type[BaseException], ...] = (TypeError, ValueError, MemoryError)
) -> Iterator[None]:
    """An error of ``kinds`` raised inside (default: TypeError / ValueError / MemoryError) is
    one field's refusal: it leaves carrying ``config_field = field`` (the first field to claim
    it keeps it), unchanged otherwise. What the command line reads to name a flag."""
    try:
        yield
    except kinds as exc:
        if getattr(exc, "config_field", None) is None:
            exc.config_field = field
        raise


def blamed_on(field: str, exc: BaseException) -> BaseException:
    """``exc`` carrying ``config_field = field`` (:func:`blames`, for a ``raise``)."""
    exc.config_field = field
    return exc


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
    two fields naming the same file (each followed to its final target, a hard link counting
    as the file: :func:`zg._checks.output_clash`), or an output that is one of ``inputs`` (the files and
    folders the run reads: its config file, its dataset) or lies inside an input folder
    (:func:`zg._checks.input_conflict`, the check ``zg train`` makes).
    Nothing is created or written.
    """
    files = {}
    for name, path in (("history_path", history_path), ("model_path", model_path)):
        if path is not None:
            with blames(name):
                made = OUTPUT_FIELDS_MAKE_FOLDERS[name]
                files[name] = output_file_arg(path, name, make_parents=made)
    if checkpoint_dir is not None:
        with blames("checkpoint_dir"):
            folder = output_folder_arg(checkpoint_dir, "checkpoint_dir")
            inside = folder / CHECKPOINT_FILE
            if inside.is_dir():
                raise ValueError(
                    f"checkpoint_dir {str(folder)!r}: {str(inside)!r} is a directory, "
                    "so no checkpoint can be written there"
                )
        files["checkpoint_dir"] = inside
    clash = output_clash(list(files.items()))
    if clash is not None:
        first, second, target = clash
        raise ValueError(
            f"{first} and {second} name the same file {str(target)!r} (links followed); one "
            "would overwrite the other. Give each output its own path"
        )
    outputs = list(files.items())
    if checkpoint_dir is not None:
        outputs.append(("checkpoint_dir", checkpoint_dir))
    sources = [p for p in inputs if p is not None]
    for name, path in outputs:
        given = input_conflict(path, sources, name)
        if given is not None:
            raise blamed_on(
                name,
                ValueError(
                    f"{name} {os.fspath(path)!r} is the run's input {os.fspath(given)!r} or lies "
                    "inside it (links followed); writing there would overwrite what the run reads. "
                    "Choose another path"
                ),
            )
