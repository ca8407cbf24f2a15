"""Real torchrun across hosts: one agent per NetLab host, c10d rendezvous, Grappa training."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zg.netlab import NetLab, unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"NetLab unavailable: {REASON}")

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def torchrun_across(lab: NetLab, config: dict, workdir: Path, port: int = 29517, timeout: float = 240):
    """Start one torchrun agent per host (c10d rendezvous on host 0) and wait for all of them."""
    cfg = workdir / "config.json"
    cfg.write_text(json.dumps(config))
    out = workdir / "history.json"
    procs = []
    for host in range(lab.hosts):
        argv = [TORCHRUN, f"--nnodes={lab.hosts}", "--nproc-per-node=1", f"--node-rank={host}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={lab.addresses[0]}:{port}",
                "--rdzv-id=zg-netns", f"--rdzv-conf=is_host={int(host == 0)}", "--max-restarts=0",
                # Namespaces share the machine's hostname; tell each agent its own address.
                f"--local-addr={lab.addresses[host]}",
                "-m", "zg.grappa", "--config", str(cfg), "--out", str(out)]
        log = open(workdir / f"host{host}.log", "w")
        procs.append((lab.popen(host, argv, stdout=log, stderr=subprocess.STDOUT,
                                extra_env={"OMP_NUM_THREADS": "1", "DGLBACKEND": "pytorch"}), log))
    codes = []
    try:
        for proc, _ in procs:
            codes.append(proc.wait(timeout=timeout))
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    logs = {h: (workdir / f"host{h}.log").read_text()[-3000:] for h in range(lab.hosts)}
    return codes, out, logs


@pytest.mark.timeout(400)
def test_grappa_trains_across_two_hosts(tmp_path):
    config = {"dataset": "cora", "trainer": "grappa", "estimator": "batch", "epochs": 2,
              "repartition_every": 1, "batch_size": 70, "hidden_dim": 16, "timeout": 60.0,
              "seed": 0}
    with NetLab(hosts=2, bandwidth="1gbit", prefix="zgm") as lab:
        codes, out, logs = torchrun_across(lab, config, tmp_path)
    assert codes == [0, 0], logs
    history = json.loads(out.read_text())
    assert history["workers"] == 2 and history["format"] == "zg.grappa.history"
    assert len(history["epochs"]) == 2
    sent = history["bytes_sent_per_worker"]
    assert len(sent) == 2 and all(b > 0 for b in sent)
