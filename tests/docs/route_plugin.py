"""A zg.grappa worker plugin (test-only) that records which walk steps a worker calls.

``tests/docs/test_route.py`` sets ``ZG_GRAPPA_WORKER_PLUGIN`` to this file and ``ZG_ROUTE_WATCH``
to a JSON file: ``{"functions": [[file, first line], ...], "out": folder}``. Every worker
imports the plugin before it builds anything; from then on it appends one JSON line per call of
a watched function to ``out/calls-<pid>.jsonl``: ``[function, [watched functions below it]]``
(a function is its index in the list). The watched frames already running when the plugin is
imported (the worker's entry, ``run_worker``, ...) are written first, outermost first, as if
called then. Lines are flushed one by one: a worker ends with ``os._exit``.
"""

import json
import os
import sys

WATCH_ENV = "ZG_ROUTE_WATCH"


def _install() -> None:
    with open(os.environ[WATCH_ENV]) as f:
        spec = json.load(f)
    index = {(os.path.realpath(file), line): i for i, (file, line) in enumerate(spec["functions"])}
    out = open(os.path.join(spec["out"], f"calls-{os.getpid()}.jsonl"), "a", buffering=1)
    known: dict = {}

    def watched(code):
        if code not in known:
            known[code] = index.get((os.path.realpath(code.co_filename), code.co_firstlineno))
        return known[code]

    def below(frame) -> list:
        found, f = [], frame
        while f is not None:
            if (i := watched(f.f_code)) is not None:
                found.append(i)
            f = f.f_back
        return found

    stack, f = [], sys._getframe(1)
    while f is not None:
        stack.append(f)
        f = f.f_back
    for frame in reversed(stack):  # outermost first
        if (i := watched(frame.f_code)) is not None:
            out.write(json.dumps([i, below(frame.f_back)]) + "\n")

    def profile(frame, event, arg):
        if event == "call" and (i := watched(frame.f_code)) is not None:
            out.write(json.dumps([i, below(frame.f_back)]) + "\n")

    sys.setprofile(profile)


if os.environ.get(WATCH_ENV):
    _install()
