"""Convert legacy bench/results/*.json files to the one result format (zg-result/1), losslessly.

    python tools/convert_results.py            # convert every legacy file in bench/results/ in place
    python tools/convert_results.py --check    # exit 1 if any file there is not zg-result/1

The mapping is bench/_machine.document(..., converted=True), the one a bench's write_json uses:
``benchmark`` -> bench (else the file's bench script), ``machine``, ``command``/``argv`` ->
command (null when absent), ``source`` (nulls when absent), ``settings``/``setting`` ->
settings, ``seeds`` when a list of int, the per-row list (``rows``, ``results`` or ``runs``) ->
rows, ``note`` when a str; every other key is kept verbatim under ``detail``. The headline
metrics come from bench/_headlines.py. A file already in the format is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _machine import document

from zg.experiments import results


def convert(name: str, legacy: dict) -> dict:
    """The zg-result/1 document of one legacy result dict (its file's stem is ``name``)."""
    if legacy.get("format") == results.FORMAT:
        return results.validate(legacy, where=name)
    return document(name, legacy, converted=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a file is not yet converted")
    ap.add_argument(
        "--headlines", action="store_true", help="recompute the headline metrics of converted files"
    )
    ap.add_argument("folder", nargs="?", default=str(results.RESULTS_DIR))
    args = ap.parse_args(argv)
    stale = []
    for path in sorted(Path(args.folder).glob("*.json")):
        with open(path) as f:
            legacy = json.load(f)
        if legacy.get("format") == results.FORMAT:
            if args.headlines and not args.check:
                doc = document(path.stem, legacy, converted=True)
                if doc["headline"] != legacy["headline"]:
                    results.write(path, doc)
                    print(f"{path.name}: {len(doc['headline'])} headline metrics")
            continue
        stale.append(path.name)
        if not args.check:
            doc = convert(path.stem, legacy)
            results.write(path, doc)
            print(
                f"converted {path.name}: bench {doc['bench']}, {len(doc['rows'])} rows, "
                f"{len(doc['headline'])} headline metrics"
            )
    if args.check and stale:
        print(f"not in {results.FORMAT}: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
