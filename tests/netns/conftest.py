"""The multi-host tests drive hosts built by tools/netlab.py: a test and bench harness (it needs
root and iproute2), kept out of the zg package and imported from tools/ like bench/network.py does."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
