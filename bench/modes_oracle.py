"""How much a hybrid dispatcher could win at best, from a bench/modes.py JSON (Garaph section 5.1).

For every (program, graph, budget) row whose CPU-only and GPU-only runs took
the same iterations (synchronous runs of the same program do), the *oracle*
runs each iteration on whichever processor was faster in it, switching for
free: sum over iterations of min(t_cpu, t_gpu).  Sharing an iteration's
pages can shorten it further by at most the slower processor's share,
``t_cpu t_gpu / (t_cpu + t_gpu)`` instead of ``min(t_cpu, t_gpu)``
(both at their full rate on disjoint pages, nothing else in the way): the
*bound* column.  Both are over the better single mode's total; a hybrid run
cannot go below the bound, whatever its policy.  The table also gives the
iterations the CPU won and the measured hybrid run over the better mode.

Usage::

    python -m bench modes-oracle bench/results/modes-....json[.gz] [...]

No case is timed here: it reads the rows bench/harness.py wrote (its
:func:`harness.read_rows`), or the JSON document written before the harness.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys

from bench import harness


def rows_of(path: str) -> list:
    """The rows of bench/modes.py's results: a JSON document (before the harness)
    or JSON lines whose ``summary`` rows hold them (bench/harness.py)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        text = handle.read()
    try:
        return json.loads(text)["rows"]
    except json.JSONDecodeError:
        return [row for line in harness.read_rows(path) if line.get("case") == "summary"
                for row in line["record"]["rows"]]


def iteration_seconds(mode: dict) -> list | None:
    records = mode.get("records") if isinstance(mode, dict) else None
    return [r["seconds"] for r in records] if records else None


def oracle(cpu: list, gpu: list) -> dict:
    """Totals of the per-iteration choices against the better single mode."""
    best = min(sum(cpu), sum(gpu))
    switching = sum(min(c, g) for c, g in zip(cpu, gpu))
    sharing = sum(c * g / (c + g) for c, g in zip(cpu, gpu) if c + g > 0)
    return {"best": best, "oracle_over_best": switching / best,
            "bound_over_best": sharing / best,
            "cpu_wins": sum(c < g for c, g in zip(cpu, gpu))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="bench/modes.py results (.json or .json.gz)")
    args = parser.parse_args(argv)
    for path in args.json:
        try:
            rows = rows_of(path)
        except (OSError, ValueError, KeyError) as error:
            print(f"{path}: not a bench/modes.py result ({error})", file=sys.stderr)
            return 1
        print(f"\n== {path}")
        print(f"{'program':9} {'graph':22} {'budget':6} {'iters':>5} {'cpu s':>8} {'gpu s':>8} "
              f"{'CPU wins':>9} {'oracle':>7} {'bound':>6} {'hybrid':>7}")
        for row in rows:
            modes = row.get("modes", {})
            cpu, gpu = iteration_seconds(modes.get("cpu")), iteration_seconds(modes.get("gpu"))
            hybrid = iteration_seconds(modes.get("hybrid"))
            if not cpu or not gpu or len(cpu) != len(gpu):
                continue
            result = oracle(cpu, gpu)
            hybrid_text = f"{sum(hybrid) / result['best']:7.3f}" if hybrid else " " * 7
            print(f"{row['program']:9} {row['graph']:22} {row['budget']:6} {len(cpu):5} "
                  f"{sum(cpu):8.4f} {sum(gpu):8.4f} {result['cpu_wins']:>4}/{len(cpu):<4} "
                  f"{result['oracle_over_best']:7.3f} {result['bound_over_best']:6.3f} "
                  f"{hybrid_text}")
    print("\noracle: each iteration on its faster processor, free switches; bound: each "
          "iteration shared at both processors' full rates; hybrid: the measured hybrid run. "
          "All over the better single mode's total (seconds of the iterations, one run).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
