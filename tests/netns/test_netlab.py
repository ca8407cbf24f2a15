"""NetLab: hosts in network namespaces on a shaped virtual switch (needs root and iproute2)."""

import subprocess
import sys
import time

import processes
import pytest
from netlab import NetLab, unavailable_reason

REASON = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"NetLab unavailable: {REASON}"),
    pytest.mark.slow,
]

SERVER = """
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 5555)); s.listen(); c, _ = s.accept(); n = 0
while True:
    d = c.recv(1 << 20)
    if not d:
        break
    n += len(d)
print(n)
"""
CLIENT = "import socket, sys; s = socket.create_connection((sys.argv[1], 5555)); s.sendall(b'x' * int(sys.argv[2])); s.close()"


def namespaces():
    return processes.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_hosts_talk_only_inside_the_lab_and_links_are_shaped():
    with NetLab(hosts=3, bandwidth="100mbit", prefix="zgt") as lab:
        assert all(name in namespaces() for name in lab.names + [lab.switch])
        root_addresses = processes.run(["ip", "addr"], capture_output=True, text=True).stdout
        assert "10.231." not in root_addresses, "the root namespace gets no address on the lab"
        server = lab.popen(
            0, [sys.executable, "-c", SERVER, lab.addresses[0]], stdout=subprocess.PIPE, text=True
        )
        time.sleep(1.0)
        size = 12 * 2**20
        client = lab.run(2, [sys.executable, "-c", CLIENT, lab.addresses[0], str(size)], timeout=60)
        assert client.returncode == 0, client.stderr
        assert int(server.communicate(timeout=30)[0]) == size
        # The bytes went through the token-bucket shaper of the sender's link (structure, not speed).
        stats = lab.run(2, ["tc", "-s", "qdisc", "show", "dev", lab.interface]).stdout
        assert "tbf" in stats and "rate 100Mbit" in stats
        sent = int(stats.split("Sent ")[1].split(" bytes")[0])
        assert sent >= size
    assert not any(name in namespaces() for name in lab.names + [lab.switch]), "torn down"


def test_teardown_after_a_failure():
    with pytest.raises(RuntimeError, match="boom"):
        with NetLab(hosts=2, prefix="zgf") as lab:
            names = lab.names + [lab.switch]
            raise RuntimeError("boom")
    assert not any(name in namespaces() for name in names)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hosts"):
        NetLab(hosts=1)
    with pytest.raises(ValueError, match="prefix"):
        NetLab(prefix="way-too-long")
