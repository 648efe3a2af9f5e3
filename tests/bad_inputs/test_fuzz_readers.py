"""Fuzzing the input readers: damaged files are an error with a message, never worse.

Small valid files of every format (SNAP, .el, .wel, .mtx, .gr, .sg, .wsg,
.bcsr, .bwcsr) are mutated with a fixed seed: bytes flipped, the file cut
short, junk inserted, a range deleted or repeated, numbers replaced by huge,
negative or non-numeric ones; gzip, bzip2 and xz copies are flipped or
cut.  Each case is loaded with ``Graph.load``; it must either succeed with
a sane graph (no more edges than the file could hold) or raise a
:class:`~garaphpy.errors.GaraphError` with a one-line message.  Any other
exception, a crash of the interpreter or a case taking longer than
:data:`CASE_SECONDS` fails the test, naming the case's file.

The cases run in one child process (``python THIS_FILE WORKDIR``), under a
limit on its address space so that a reader allocating what a header
declares fails fast instead of taking the machine; the parent reads one
JSON line per case and so sees a crash or a hang case by case.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import random
import re
import selectors
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED = 22
#: mutated files per format (9 formats), besides 6 compressed ones each
CASES_PER_FORMAT = 26
CASE_SECONDS = 30.0
#: the child's address-space limit: well above what the small cases need
ADDRESS_SPACE_BYTES = 6 << 30

HUGE_NUMBERS = [2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -1,
                -(2**31), -(2**63), 0]
JUNK = [b"\x00", b"\xff\xfe", b"-", b"abc", b"1e999", b"nan", b"inf", b"\n\n", b" 7 ",
        b"%%MatrixMarket", b"p sp 3 3\n", b"\t", b"\r\n", b"0x1f", b"99999999999999999999"]

COMPRESSIONS = [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)]
EDGES = [(0, 1, 3), (1, 2, 5), (2, 0, 1), (3, 1, 2), (2, 3, 7), (4, 0, 4)]
NUM_VERTICES = 5


# ------------------------------------------------------- valid small inputs --
def _csr(edges):
    rows = sorted(edges, key=lambda edge: edge[0])
    offsets = [0] * (NUM_VERTICES + 1)
    for u, *_ in edges:
        offsets[u + 1] += 1
    for i in range(NUM_VERTICES):
        offsets[i + 1] += offsets[i]
    return offsets, rows


def _gap(weighted: bool) -> bytes:
    """GAP .sg/.wsg (gapbs writer.h), directed: out-CSR then in-CSR."""
    def section(edges):
        offsets, rows = _csr(edges)
        data = struct.pack(f"<{NUM_VERTICES + 1}q", *offsets)
        for _, v, w in rows:
            data += struct.pack("<ii", v, w) if weighted else struct.pack("<i", v)
        return data
    return (struct.pack("<?qq", True, len(EDGES), NUM_VERTICES) + section(EDGES)
            + section([(v, u, w) for u, v, w in EDGES]))


def _subway(weighted: bool) -> bytes:
    """Subway .bcsr/.bwcsr (tools/converter.cpp): n, m, nodePointer[n], records."""
    offsets, rows = _csr(EDGES)
    data = struct.pack("<II", NUM_VERTICES, len(EDGES))
    data += struct.pack(f"<{NUM_VERTICES}I", *offsets[:NUM_VERTICES])
    for _, v, w in rows:
        data += struct.pack("<II", v, w) if weighted else struct.pack("<I", v)
    return data


def valid_inputs() -> dict[str, tuple[str, bytes]]:
    """format -> (file name, content) of one small valid file each."""
    lines = "".join
    return {
        "snap": ("graph.txt", (f"# Directed graph: g.txt\n# Nodes: {NUM_VERTICES} Edges: "
                               f"{len(EDGES)}\n# FromNodeId\tToNodeId\n"
                               + lines(f"{u}\t{v}\n" for u, v, _ in EDGES)).encode()),
        "el": ("graph.el", lines(f"{u} {v}\n" for u, v, _ in EDGES).encode()),
        "wel": ("graph.wel", lines(f"{u} {v} {w}\n" for u, v, w in EDGES).encode()),
        "mtx": ("graph.mtx", ("%%MatrixMarket matrix coordinate integer general\n% c\n"
                              f"{NUM_VERTICES} {NUM_VERTICES} {len(EDGES)}\n"
                              + lines(f"{u + 1} {v + 1} {w}\n" for u, v, w in EDGES)).encode()),
        "gr": ("graph.gr", (f"c DIMACS\np sp {NUM_VERTICES} {len(EDGES)}\n"
                            + lines(f"a {u + 1} {v + 1} {w}\n" for u, v, w in EDGES)).encode()),
        "sg": ("graph.sg", _gap(False)),
        "wsg": ("graph.wsg", _gap(True)),
        "bcsr": ("graph.bcsr", _subway(False)),
        "bwcsr": ("graph.bwcsr", _subway(True)),
    }


# ------------------------------------------------------------- mutations --
def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data))]


def _insert(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    junk = rng.choice(JUNK) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 16))
    return data[:at] + junk + data[at:]


def _delete_or_repeat(rng: random.Random, data: bytes) -> bytes:
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.randint(1, 24))
    if rng.random() < 0.5:
        return data[:start] + data[end:]
    return data[:end] + data[start:end] + data[end:]


def _huge_number(rng: random.Random, data: bytes, binary: bool) -> bytes:
    number = rng.choice(HUGE_NUMBERS)
    if binary:          # overwrite an aligned 4- or 8-byte field of the header or arrays
        width = rng.choice([4, 8])
        at = rng.randrange(0, max(1, len(data) - width + 1))
        fmt = "<q" if width == 8 else "<i"
        limit = 2**63 if width == 8 else 2**31
        packed = struct.pack(fmt, (number + limit) % (2 * limit) - limit)
        return data[:at] + packed + data[at + width:]
    tokens = list(re.finditer(rb"-?\d+", data))
    if not tokens:
        return data
    token = rng.choice(tokens)
    text = str(number).encode() if rng.random() < 0.8 else rng.choice([b"1.5", b"-0", b"x"])
    return data[:token.start()] + text + data[token.end():]


def mutated_cases(seed: int = SEED, per_format: int = CASES_PER_FORMAT):
    """(name, format, content) of every case; the same for the same seed."""
    rng = random.Random(seed)
    cases = []
    for format, (name, data) in valid_inputs().items():
        binary = format in ("sg", "wsg", "bcsr", "bwcsr")
        for k in range(per_format):
            kind = ["flip", "truncate", "insert", "delete", "huge", "huge"][k % 6]
            content = data
            for _ in range(1 + (k >= per_format // 2)):    # the second half: two mutations
                content = {"flip": lambda d: _flip(rng, d),
                           "truncate": lambda d: _truncate(rng, d),
                           "insert": lambda d: _insert(rng, d),
                           "delete": lambda d: _delete_or_repeat(rng, d),
                           "huge": lambda d: _huge_number(rng, d, binary)}[kind](content) \
                    or content
            # half the cases name their format, half leave it to detection
            cases.append((f"{k:02d}-{kind}-{name}", format if k % 2 else "auto", content))
        for k, (suffix, compress) in enumerate(COMPRESSIONS * 2):
            mutate = _flip if k < len(COMPRESSIONS) else _truncate
            cases.append((f"z{k}-{mutate.__name__[1:]}-{name}{suffix}", format,
                          mutate(rng, compress(data))))
    return cases


# ------------------------------------------------------------ the child --
def run_cases(workdir: Path) -> None:
    """Load every case in ``workdir/cases.json``; one JSON line per case on stdout."""
    import resource
    import shutil
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    from garaphpy.errors import GaraphError
    from garaphpy.graph import Graph

    warnings.simplefilter("ignore")
    cases = json.loads((workdir / "cases.json").read_text())
    for case in cases:
        path = workdir / case["name"]
        store = workdir / "store"
        print(json.dumps({"start": case["name"]}), flush=True)
        started = time.perf_counter()
        report = {"name": case["name"]}
        try:
            graph = Graph.load(path, store=store, format=case["format"], progress=False)
            report.update(outcome="loaded", edges=int(graph.num_edges),
                          vertices=int(graph.num_vertices))
        except GaraphError as error:
            report.update(outcome="error", type=type(error).__name__, message=str(error))
        except BaseException as error:  # what the test is looking for
            report.update(outcome="other", type=type(error).__name__, message=str(error)[:300])
        report["seconds"] = round(time.perf_counter() - started, 3)
        shutil.rmtree(store, ignore_errors=True)
        print(json.dumps(report), flush=True)


# ------------------------------------------------------------- the test --
def test_mutated_inputs_load_or_fail_with_a_message(tmp_path):
    cases = mutated_cases()
    assert len(cases) == 9 * (CASES_PER_FORMAT + 2 * len(COMPRESSIONS))
    assert len({content for _, _, content in cases}) > 0.9 * len(cases)   # really mutated
    for name, _, content in cases:
        (tmp_path / name).write_bytes(content)
    (tmp_path / "cases.json").write_text(json.dumps(
        [{"name": name, "format": format} for name, format, _ in cases]))
    env = {**os.environ, "GARAPHPY_CACHE": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "2",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, __file__, str(tmp_path)], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reports, current = [], None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 120 + CASE_SECONDS     # start-up and compilation first
    try:
        while True:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                pytest.fail(f"case {current} did not finish within {CASE_SECONDS} s (a hang)")
            line = child.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if "start" in message:
                current = message["start"]
                deadline = time.monotonic() + CASE_SECONDS
            else:
                reports.append(message)
                current = None
    finally:
        child.kill()
        _, err = child.communicate()
    assert child.returncode in (0, -9) and current is None, \
        f"the interpreter died (exit {child.returncode}) on case {current}:\n{err[-2000:]}"
    assert len(reports) == len(cases), err[-2000:]
    sizes = {name: len(content) for name, _, content in cases}
    bad = []
    for report in reports:
        name = report["name"]
        if report["outcome"] == "other":
            bad.append(f"{name}: {report['type']}: {report['message']}")
        elif report["outcome"] == "error":
            if not report["message"].strip() or "\n" in report["message"]:
                bad.append(f"{name}: {report['type']} without a one-line message: "
                           f"{report['message']!r}")
        elif not 0 <= report["edges"] <= 2 * sizes[name] or report["vertices"] < 0:
            bad.append(f"{name}: loaded {report['edges']} edges and {report['vertices']} "
                       f"vertices from {sizes[name]} bytes")
    assert not bad, "\n".join(bad)
    outcomes = [report["outcome"] for report in reports]
    # the mutations reach the readers' error paths, and some damage is still a graph
    assert outcomes.count("error") > len(cases) // 4 and "loaded" in outcomes


if __name__ == "__main__":
    run_cases(Path(sys.argv[1]))
