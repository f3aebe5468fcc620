"""The same sweep run one task after another in this process, then on an embedded Dask cluster:
the time of each, their ratio, and whether every report is the same.

    python scripts/sweep_bench.py MODELS... [--arithmetic directml onnxruntime] [--ort-release 1.24+ 1.20]
                                  [--shape NAME=D0,D1,...] [--workers 2]

Each run starts from an empty database, so neither skips a task; the cluster's time includes
starting it (its worker processes import dml_ep and onnxruntime).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from dml_ep.passes import DEFAULT_RELEASE
from dml_ep.sweep.run import sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--arithmetic", nargs="+", default=["directml", "onnxruntime"])
    parser.add_argument("--ort-release", nargs="+", default=[DEFAULT_RELEASE])
    parser.add_argument("--shape", action="append", default=[], help="NAME=D0,D1,... (repeatable)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    shapes = tuple((text.rpartition("=")[0], tuple(int(d) for d in text.rpartition("=")[2].split(","))) for text in args.shape)
    settings = dict(arithmetics=args.arithmetic, ort_releases=args.ort_release, shapes=shapes)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        sequential = sweep(args.models, db=os.path.join(folder, "sequential.db"), sequential=True, **settings)
        one_by_one = time.perf_counter() - started
        started = time.perf_counter()
        clustered = sweep(args.models, db=os.path.join(folder, "cluster.db"), workers=args.workers, **settings)
        on_cluster = time.perf_counter() - started
    same = [(a["key"], a["status"], a["report"]["models"], a["report"]["errors"]) for a in sequential] == \
           [(b["key"], b["status"], b["report"]["models"], b["report"]["errors"]) for b in clustered]
    statuses = {status: sum(r["status"] == status for r in sequential) for status in ("ok", "mismatch", "planned", "failed")}
    print(f"{len(sequential)} tasks ({', '.join(f'{n} {s}' for s, n in statuses.items() if n)}): one by one in this process "
          f"{one_by_one:.1f} s, on a LocalCluster of {args.workers} workers {on_cluster:.1f} s, ratio {on_cluster / one_by_one:.2f}; "
          f"reports {'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
