"""Ctrl-C held across a span that must happen whole (docs/reliability.md, "Interruption").

:class:`held_interrupt` replaces Python's SIGINT handler for the span of a ``with`` block by one
that only records the signal, and raises :class:`KeyboardInterrupt` when the block ends: the
block's writes happen all or not at all. A second Ctrl-C raises at once. Used for one batch of
an epoch (its sampling to its publication, :meth:`zg.Engine.train_epoch`), for the assignments
of a checkpoint's load (:func:`zg.checkpoint.load`), and for putting torch's global generators
back (:func:`zg.rng.global_rng_kept`). Nested blocks are inert: only the outermost one, where
the handler is Python's own, holds.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["held_interrupt"]


class held_interrupt:
    """Hold Ctrl-C (SIGINT) for the span of one batch, from its sampling to its publication, and
    raise it there: an interruption never lands inside the optimizer's in-place update, or
    between an applied step and its position. A second Ctrl-C raises at once. Only where the
    handler is Python's own, in the main thread; elsewhere it does nothing. (A class, not a
    generator: it runs once per batch; its cost is two sigaction calls.)"""

    __slots__ = ("held", "active")

    def __enter__(self):
        self.held = False
        self.active = (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
            and threading.current_thread() is threading.main_thread()
        )
        if self.active:
            signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame):
        if self.held:  # asked twice: now
            raise KeyboardInterrupt
        self.held = True

    def __exit__(self, kind, value, traceback):
        if self.active:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if self.held and kind is None:
                raise KeyboardInterrupt
        return False

    def release(self) -> None:
        """Python's own handler back if this hold's is still installed (an exception landed
        inside ``__enter__`` or ``__exit__``, between the handler's change and the rest)."""
        if signal.getsignal(signal.SIGINT) == self._hold:
            signal.signal(signal.SIGINT, signal.default_int_handler)
