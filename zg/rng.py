"""Every random stream of the kit, named, in one place.

Where it sits: under everything that draws. Sampling is a counter-based hash (splitmix64) of
``(seed, epoch, batch, hop, node, round)``; the named streams below derive the integers every
other draw starts from. A draw never depends on how many draws came before it, so a batch can
be rerun (a rewind after an envelope overflow), resumed from a checkpoint, or replayed from a
CUDA Graph and still draw exactly the same.

    stream                      used for                                     derived from
    batch_key                   a batch's sampling key (host int)            seed, epoch, batch
    hop_key                     one hop's sampling key (host int)            the batch key, hop
    epoch_key_table             every batch's key and hop keys of an epoch   seed, epoch
    dropout_seed                torch's generator before a batch's dropout   the batch key
    order_seed                  an epoch's shuffle of the training nodes     seed, epoch
    worker_seed                 a Grappa worker's streams (per super-epoch)  seed, rank[, s]
    PROFILE_EPOCH / EVAL_EPOCH  the epochs envelope profiling and sampled    (named constants)
                                evaluation draw from, never a training epoch

The global generators are the caller's. Dropout draws from torch's global generator, so
:func:`seed_dropout` reseeds it before every batch; every public entry point that trains
(``Engine.train_epoch``, ``run_batch``, ``fit``, ``rebuild``, ``sample``, ``load``,
``evaluate``) runs inside :func:`keeps_global_rng`, which puts torch's CPU generator (and, when
CUDA is initialised, every CUDA device's) back as it found it when the call returns or raises.
So a notebook's own ``torch.rand`` draws after ``engine.fit(...)`` are those it would have made
without it. The kit never touches numpy's or Python's global generators (its numpy draws use
seeded ``np.random.Generator`` objects, its torch draws seeded ``torch.Generator`` objects).
Not restored: DGL's own global generator (mode "dgl" seeds it with ``dgl.seed``; DGL has no
way to read it back), and a CUDA generator that CUDA's first initialisation inside the call
created. Building a model (``zg.models.SAGE(...)``) draws its initial parameters from torch's
global generator, as every torch module does: a draw, not a reseed.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from ._interrupt import held_interrupt

__all__ = [
    "batch_ranges",
    "epoch_batches",
    "mix64",
    "finalise64",
    "batch_key",
    "hop_key",
    "epoch_key_table",
    "dropout_seed",
    "seed_dropout",
    "order_seed",
    "worker_seed",
    "epoch_order",
    "PROFILE_EPOCH",
    "EVAL_EPOCH",
    "global_rng_kept",
    "keeps_global_rng",
]

PROFILE_EPOCH = -1  # Envelope.profile's warm-up batches
EVAL_EPOCH = -2  # Engine.evaluate(split, sampled=True)

_MASK64 = (1 << 64) - 1


def _signed(c: int) -> int:
    """A uint64 constant as the int64 with the same bits (torch has no uint64 arithmetic)."""
    return c - (1 << 64) if c >= (1 << 63) else c


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)


def _shr(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's >> is arithmetic on signed ints)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 on int64 tensors (wrapping arithmetic): :func:`finalise64` of ``x + golden``;
    a bijection on 64 bits."""
    return finalise64(x + _GOLDEN)


def finalise64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's output function (two xorshift-multiply rounds and a last xorshift), without
    the ``+ golden`` step that :func:`mix64` adds first: a caller that adds a constant anyway
    folds the golden step into it and saves one op."""
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    return x ^ _shr(x, 31)


def _mix_int(x: int) -> int:
    """mix64 on a Python int, for host-side keys (same bits as the tensor version)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return _signed(x ^ (x >> 31))


def device_scalar(value: int, device: torch.device) -> torch.Tensor:
    """An int64 0-d tensor holding ``value`` on ``device``, written by a fill kernel.

    ``torch.tensor(value, device=cuda)`` copies from pageable host memory, which makes the host
    wait for the device (torch's sync-debug mode reports it); a fill carries the value as a
    kernel argument and queues like any other kernel."""
    return torch.full((), int(value), dtype=torch.int64, device=device)


def batch_key(seed: int, epoch: int, batch: int) -> int:
    """The int64 key of one (seed, epoch, batch): every random choice of that batch derives from it."""
    return _mix_int((_mix_int((_mix_int(seed) + epoch) & _MASK64) + batch) & _MASK64)


HOP_GOLDEN = 0x9E3779B97F4A7C15  # hop h's key: mix64(batch key + (h + 1) * HOP_GOLDEN)


def hop_key(key: int, hop: int) -> int:
    """Hop ``hop``'s sampling key from a batch key (host ints; zg.sampling's device version)."""
    return _mix_int((key + (hop + 1) * HOP_GOLDEN) & _MASK64)


def epoch_key_table(seed: int, epoch: int, batches: int, hops: int) -> torch.Tensor:
    """int64 [batches, 1 + hops] (host): each batch's :func:`batch_key`, then its hops' keys.

    A static step reads its row with one ``index_select`` by the device batch counter instead
    of hashing on the device (four mix64 calls, each a dozen launches, per iteration); the
    engine uploads the table with the epoch's seed table."""
    rows = []
    for b in range(batches):
        key = batch_key(seed, epoch, b)
        rows.append([key] + [hop_key(key, h) for h in range(hops)])
    return torch.tensor(rows, dtype=torch.int64).reshape(batches, 1 + hops)


def dropout_seed(key: int) -> int:
    """The seed of torch's generator before a batch's forward pass (a non-negative int63), so a
    rewound or resumed batch draws the same dropout masks as the first time."""
    return key & ((1 << 63) - 1)


def seed_dropout(key: int) -> None:
    """Seed torch's generators with ``dropout_seed(key)`` before a batch's forward pass.

    The same as ``torch.manual_seed(dropout_seed(key))`` for every generator a batch can draw
    from, without its per-call cost: while CUDA is not initialised (every CPU run), torch's
    ``manual_seed`` queues a lazy CUDA seed and records a ``traceback.format_stack()`` with it,
    a cost of the order of a small iteration's own. The CUDA generators are seeded only once
    CUDA is initialised (an engine on a GPU initialises it when it moves its tensors).
    """
    value = dropout_seed(key)
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(value)


@contextlib.contextmanager
def global_rng_kept() -> Iterator[None]:
    """Run the block, then put torch's global generators back as they were: the CPU one, and
    every CUDA device's when CUDA was initialised at entry (their states are host values: no
    device sync). For the boundaries of public calls, never inside an iteration."""
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        with held_interrupt():  # a Ctrl-C here waits for both to be put back
            torch.random.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)


_F = TypeVar("_F", bound=Callable[..., Any])


def keeps_global_rng(method: _F) -> _F:
    """Decorate a public entry point: it runs in :func:`global_rng_kept`."""

    @functools.wraps(method)
    def kept(*args: Any, **kwargs: Any) -> Any:
        with global_rng_kept():
            return method(*args, **kwargs)

    return kept  # type: ignore[return-value]


def order_seed(seed: int, epoch: int) -> int:
    """The generator seed of an epoch's shuffle of the training nodes."""
    return (int(seed) * 1_000_003 + int(epoch)) % (2**63 - 1)


def epoch_order(nodes: torch.Tensor, seed: int, epoch: int) -> torch.Tensor:
    """The seeded shuffle of ``nodes`` used for ``epoch`` (int64 [len(nodes)], on the host)."""
    gen = torch.Generator().manual_seed(order_seed(seed, epoch))
    return nodes.cpu()[torch.randperm(nodes.numel(), generator=gen)]


def batch_ranges(count: int, batch_size: int) -> list[tuple[int, int]]:
    """[(start, end)] of the consecutive batches of ``count`` items (the last may be short)."""
    return [(s, min(s + batch_size, count)) for s in range(0, count, batch_size)]


def epoch_batches(
    nodes: torch.Tensor, seed: int, epoch: int, batch_size: int
) -> list[torch.Tensor]:
    """The seed tensors of every batch of ``epoch``: :func:`epoch_order` cut into ``batch_size``
    chunks. The DGL baseline and every zg mode visit these, in this order."""
    order = epoch_order(nodes, seed, epoch)
    return [order[s:e] for s, e in batch_ranges(order.numel(), batch_size)]


def worker_seed(*parts: int) -> int:
    """A Grappa worker's seed from (run seed, rank[, super-epoch ...]), in [0, 2^62)."""
    value = 0x5EED
    for p in parts:
        value = (value * 1_000_003 + int(p)) % (2**62)
    return value
