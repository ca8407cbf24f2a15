"""zg._progress_switch: ``ZG_PROGRESS``, the one switch that says whether the kit's progress
bars show.

Where it sits: below every bar of the kit, the measurements' (:mod:`zg.experiments._progress`,
which documents the switch and re-exports it, and :meth:`zg.Engine.fit`) and a Grappa run's
(:mod:`zg.grappa.progress`), so each reads the same switch without importing the other.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

__all__ = ["progress_enabled", "OFF", "ON"]

OFF = frozenset({"0", "false", "off", "no"})
ON = frozenset({"1", "true", "on", "yes"})


def progress_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when the long measurements should show a bar: ``ZG_PROGRESS``, then pytest (the
    values: :mod:`zg.experiments._progress`). ``environ``: the environment to read (default:
    ``os.environ``)."""
    env = os.environ if environ is None else environ
    value = env.get("ZG_PROGRESS", "").strip().lower()
    if value in OFF:
        return False
    if value in ON:
        return True
    if value:
        warnings.warn(
            f"ZG_PROGRESS={env['ZG_PROGRESS']!r} is none of {sorted(ON | OFF)}; ignored",
            stacklevel=2,
        )
    return "PYTEST_CURRENT_TEST" not in env
