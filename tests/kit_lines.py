"""Line-by-line tracing of the kit's own code, for the interruption tests: the places where
Python checks for a signal and where an asynchronous exception can land.

``kit_tracer(on_line)`` counts the line events of code under ``zg/`` (calls elsewhere are not
traced) and calls ``on_line(frame, index)`` at each (index from 1); ``at_line(k, action)`` calls
``action(frame)`` at the k-th. Both return ``(tracer, seen)``: the function for
``sys.settrace`` and a one-item list holding the count so far.
"""

from __future__ import annotations

from pathlib import Path

import zg

ZG_DIR = str(Path(zg.__file__).parent)


def kit_tracer(on_line):
    seen = [0]

    def tracer(frame, event, arg):
        if event == "call":
            return tracer if frame.f_code.co_filename.startswith(ZG_DIR) else None
        if event == "line":
            seen[0] += 1
            on_line(frame, seen[0])
        return tracer

    return tracer, seen


def at_line(k: int, action):
    def on_line(frame, index):
        if index == k:
            action(frame)

    return kit_tracer(on_line)
