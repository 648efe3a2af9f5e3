"""``python -m bench SUBCOMMAND [options]``: the one entry point of bench/.

Run from the repository root (or with it on ``PYTHONPATH``) so that both
``bench`` and ``garaphpy`` import.  ``python -m bench SUBCOMMAND --help``
gives the script's own options; peers (GAPBS, Subway) are paths given as
options, never shipped here.
"""

from __future__ import annotations

import importlib
import sys

#: Subcommand -> (module of bench/, one line on what it measures).
SUBCOMMANDS = {
    "modes": ("modes", "CPU-only, GPU-only and hybrid runs on the same graphs and budgets"),
    "modes-oracle": ("modes_oracle", "the best any dispatcher could do, from a modes JSON"),
    "cpu": ("cpu", "CPU engine: pull throughput, dual mode, per-iteration overhead"),
    "cpu-peers": ("cpu_peers", "the CPU alone against GAPBS (--gapbs DIR): PR, BFS, SSSP, CC"),
    "sparse-batch": ("sparse_batch", "sparse CPU iterations with one switch on and off"),
    "gpu": ("gpu", "GPU: bandwidth, cuSPARSE baseline, resident and streamed pages"),
    "streamed": ("streamed", "graphs over the GPU budget, against Subway (--subway DIR)"),
    "device-loop": ("device_loop", "the GPU's device loop of sparse iterations on and off"),
    "disk": ("disk", "pages streamed from storage against the disk's own speed"),
    "checkpoint": ("checkpoint", "one checkpoint's write time against an iteration's"),
    "preprocess": ("preprocess", "store build throughput and peak memory, text and arrays"),
    "first-minute": ("first_minute", "text build and PageRank end to end against GAPBS "
                                     "(--gapbs DIR)"),
    "packed-bytes": ("packed_bytes", "bytes per edge of pages as stored and packed"),
    "compressed-pages": ("compressed_pages", "compressed pages against plain: bytes an "
                         "edge, decode speed, reads"),
    "tiers": ("tiers", "pages from disk, host and GPU budgets: bytes read against what "
              "must move"),
    "dask": ("dask_workers", "one process against 2 and 4 Dask LocalCluster workers"),
    "before-after": ("before_after", "the same runs from this tree and an older one, in "
                     "turns"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: python -m bench SUBCOMMAND [options]   (SUBCOMMAND --help: its options)",
             "", "subcommands:"]
    lines += [f"  {name:{width}}  {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"{usage()}\n\npython -m bench: no subcommand {name!r}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{SUBCOMMANDS[name][0]}")
    sys.argv[0] = f"python -m bench {name}"     # argparse's prog in usage lines
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
