"""NetLab: several test hosts on one Linux machine, as network namespaces on a virtual switch.

Where it sits: under the multi-host tests (tests/netns/) and ``bench/network.py``, which import
it from tools/ (a test and bench harness, not part of the zg package). It lets the kit run
``torchrun`` across real network stacks, one agent per host (:meth:`NetLab.torchrun`), over
links whose bandwidth it shapes, without touching the machine's own network:

    switch namespace  <prefix>-sw   holds a bridge; every link's switch end is plugged into it
    host namespaces   <prefix>-h0 ... <prefix>-h{n-1}, each with one veth ``eth0`` at
                      10.231.<net>.(i + 1)/24 and its own loopback

Both ends of every link live in namespaces NetLab created; the root namespace gets no address
and no route on them. Everything is deleted on exit, also after an exception, and stale
namespaces of an earlier crashed run with the same prefix are removed on entry.

Link shaping uses ``tc``: ``tbf`` (token bucket) for bandwidth on both ends of each link.
Latency needs the ``netem`` qdisc; kernels without it (``sch_netem`` not built or not
loaded) make ``supports_latency()`` return False and a latency request raise a clear error.

Needs root and iproute2 (``ip``, ``tc``); :func:`unavailable_reason` says why not otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["NetLab", "unavailable_reason", "supports_latency"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable_reason() -> str | None:
    """None if NetLab can run here, else a sentence saying what is missing."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    probe = "zgprobe-%d" % os.getpid()
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"cannot create a network namespace: {exc.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def supports_latency() -> bool:
    """True if the kernel has the netem qdisc (needed to add link latency)."""
    probe = "zgnetem-%d" % os.getpid()
    try:
        _ip("netns", "add", probe)
        _ip("-n", probe, "link", "set", "lo", "up")
        result = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                probe,
                "tc",
                "qdisc",
                "add",
                "dev",
                "lo",
                "root",
                "netem",
                "delay",
                "1ms",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return result.returncode == 0
    except (subprocess.CalledProcessError, OSError):
        return False
    finally:
        _ip("netns", "del", probe, check=False)


class NetLab:
    """``with NetLab(hosts=4, bandwidth="1gbit") as lab: lab.popen(0, [...])``.

    Args:
        hosts: number of host namespaces (2..16).
        bandwidth: tc rate per link direction, e.g. "1gbit", "10gbit", or None (unshaped).
        latency: one-way delay, e.g. "0.2ms" (needs netem), or None.
        prefix: namespace name prefix (keep it short: interface names are capped at 15 chars).
        net: the third octet of the private /24 (10.231.<net>.0/24) used inside the namespaces.
    """

    def __init__(
        self,
        hosts: int = 2,
        bandwidth: str | None = None,
        latency: str | None = None,
        prefix: str = "zg",
        net: int = 77,
    ):
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 2 <= hosts <= 16:
            raise ValueError(f"hosts must be an int in [2, 16], got {hosts!r}")
        if not prefix.isalnum() or len(prefix) > 6:
            raise ValueError(
                f"prefix must be alphanumeric and at most 6 characters, got {prefix!r}"
            )
        if not isinstance(net, int) or not 0 <= net <= 255:
            raise ValueError(f"net must be an int in [0, 255], got {net!r}")
        self.hosts, self.bandwidth, self.latency = hosts, bandwidth, latency
        self.prefix, self.net = prefix, net
        self.switch = f"{prefix}-sw"
        self.names = [f"{prefix}-h{i}" for i in range(hosts)]
        self.addresses = [f"10.231.{net}.{i + 1}" for i in range(hosts)]
        self.interface = "eth0"
        self._created: list[str] = []

    # ------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> NetLab:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(f"NetLab cannot run here: {reason}")
        if self.latency and not supports_latency():
            raise RuntimeError("link latency needs the netem qdisc, which this kernel lacks")
        self._remove_stale()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _remove_stale(self) -> None:
        listing = _ip("netns", "list", check=False).stdout.split()
        for name in [self.switch] + self.names:
            if name in listing:
                _ip("netns", "del", name, check=False)

    def _build(self) -> None:
        _ip("netns", "add", self.switch)
        self._created.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        _ip("-n", self.switch, "link", "set", "lo", "up")
        for i, (ns, addr) in enumerate(zip(self.names, self.addresses)):
            _ip("netns", "add", ns)
            self._created.append(ns)
            host_end, switch_end = f"{self.prefix}h{i}", f"{self.prefix}s{i}"
            # Create the pair directly inside the two namespaces: it never exists in the root one.
            _ip(
                "-n",
                ns,
                "link",
                "add",
                host_end,
                "type",
                "veth",
                "peer",
                "name",
                switch_end,
                "netns",
                self.switch,
            )
            _ip("-n", ns, "link", "set", host_end, "name", self.interface)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", self.interface)
            _ip("-n", ns, "link", "set", self.interface, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.switch, "link", "set", switch_end, "master", "br0")
            _ip("-n", self.switch, "link", "set", switch_end, "up")
            self._shape(ns, self.interface)
            self._shape(self.switch, switch_end)

    def _shape(self, ns: str, dev: str) -> None:
        if not self.bandwidth and not self.latency:
            return
        cmd = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root"]
        if self.latency:
            cmd += ["netem", "delay", self.latency]
            if self.bandwidth:
                cmd += ["rate", self.bandwidth]
        else:
            # Burst of ~1 ms at the given rate (at least 64 KiB) keeps tbf accurate at Gbit rates.
            cmd += [
                "tbf",
                "rate",
                self.bandwidth,
                "burst",
                _burst(self.bandwidth),
                "latency",
                "50ms",
            ]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)

    def close(self) -> None:
        """Delete every namespace this lab created (their veths go with them)."""
        for ns in reversed(self._created):
            _ip("netns", "del", ns, check=False)
        self._created = []

    # ------------------------------------------------------------------------- running

    def command(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed to run inside host ``host``'s namespace."""
        if not 0 <= host < self.hosts:
            raise ValueError(f"host must be in [0, {self.hosts}), got {host}")
        return ["ip", "netns", "exec", self.names[host], *argv]

    def env(self, host: int, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a process on ``host``: gloo and NCCL bound to the lab's interface."""
        env = dict(os.environ)
        env.update(
            {
                "GLOO_SOCKET_IFNAME": self.interface,
                "NCCL_SOCKET_IFNAME": self.interface,
                "TP_SOCKET_IFNAME": self.interface,
            }
        )
        env.update(extra or {})
        return env

    def popen(
        self, host: int, argv: Sequence[str], extra_env: dict[str, str] | None = None, **kwargs
    ) -> subprocess.Popen:
        return subprocess.Popen(self.command(host, argv), env=self.env(host, extra_env), **kwargs)

    def run(
        self, host: int, argv: Sequence[str], timeout: float = 60, **kwargs
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(host, argv),
            env=self.env(host),
            timeout=timeout,
            capture_output=True,
            text=True,
            **kwargs,
        )

    def torchrun(
        self,
        program: Sequence[str],
        workdir,
        *,
        port: int = 29500,
        timeout: float = 600,
        nproc_per_node: int = 1,
        max_restarts: int = 0,
        rdzv_id: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[list[int], dict[int, str]]:
        """Run ``torchrun ... <program>`` across the lab: one agent per host, all started at once.

        Every agent joins a c10d rendezvous hosted by host 0's agent on
        ``addresses[0]:port`` and is told its own address (``--local-addr``: the namespaces
        share the machine's hostname, so the default would be ambiguous); each starts
        ``nproc_per_node`` workers. ``program`` is what follows torchrun's own options, e.g.
        ``["-m", "zg.grappa", "--config", "cfg.json", "--out", "history.json"]``. Each agent's
        output goes to ``workdir/host{i}.log``; workers get ``OMP_NUM_THREADS=1`` plus
        ``extra_env``. Agents still running after ``timeout`` seconds are killed (exit code
        -9). Returns (the agents' exit codes by host, the last 3,000 characters of each log).
        """
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port must be an int in [1, 65535], got {port!r}")
        launcher = Path(sys.executable).with_name("torchrun")
        launcher = (
            [str(launcher)]
            if launcher.exists()
            else [sys.executable, "-m", "torch.distributed.run"]
        )
        workdir = Path(workdir)
        procs = []
        try:
            for host in range(self.hosts):
                argv = [
                    *launcher,
                    f"--nnodes={self.hosts}",
                    f"--nproc-per-node={nproc_per_node}",
                    f"--node-rank={host}",
                    "--rdzv-backend=c10d",
                    f"--rdzv-endpoint={self.addresses[0]}:{port}",
                    f"--rdzv-id={rdzv_id or f'{self.prefix}-{port}'}",
                    f"--rdzv-conf=is_host={int(host == 0)}",
                    f"--local-addr={self.addresses[host]}",
                    f"--max-restarts={max_restarts}",
                    *program,
                ]
                log = open(workdir / f"host{host}.log", "w")
                procs.append(
                    (
                        self.popen(
                            host,
                            argv,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            extra_env={"OMP_NUM_THREADS": "1", **(extra_env or {})},
                        ),
                        log,
                    )
                )
            codes = []
            deadline = time.monotonic() + timeout
            for proc, _ in procs:
                try:
                    codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    codes.append(-9)  # killed below
        finally:
            for proc, log in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                log.close()
        logs = {
            h: (workdir / f"host{h}.log").read_text(errors="replace")[-3000:]
            for h in range(self.hosts)
        }
        return codes, logs


def _burst(rate: str) -> str:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for unit, scale in units.items():
        if rate.lower().endswith(unit):
            bits = float(rate[: -len(unit)]) * scale
            return f"{max(64 * 1024, int(bits / 8 / 1000))}b"
    raise ValueError(f"bandwidth must look like '1gbit', '100mbit' or '500kbit', got {rate!r}")
