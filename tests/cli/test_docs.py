"""Every example of README.md and docs/*.md runs as written, each on its own.

Each fenced ``python`` block runs in a fresh interpreter, and each ``toml``
block through ``python -m garaphpy.run``, in a temporary working directory
holding a copy of the repository's ``examples/`` (what a reader who runs
them from the repository root has): a block that needs an import, a file or
a name from another block fails here.  A block whose first line is
``# gpu`` runs only where a GPU is usable, one whose first line is
``# installed`` only where garaphpy is installed (its entry points).  The documents' links to each
other are checked too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPOSITORY, cache_with_programs

DOCUMENTS = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
#: The first line that marks a block as needing a GPU.
GPU_MARKER = "# gpu"
#: The first line that marks a block as needing the installed package (its entry
#: points: the NetworkX backend), which a PYTHONPATH run of the tests does not have.
INSTALLED_MARKER = "# installed"


def backend_registered() -> bool:
    """Whether an installed garaphpy registered its NetworkX backend entry point."""
    from importlib.metadata import entry_points

    return any(point.name == "garaphpy" for point in entry_points(group="networkx.backends"))


def fenced_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """``(line of the block's first line, text)`` of each ``language`` block of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].strip() == f"```{language}":
            end = next(j for j in range(index + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((index + 2, "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        index += 1
    return blocks


def examples(language: str) -> list:
    return [pytest.param(path, line, text, id=f"{path.relative_to(REPOSITORY)}:{line}")
            for path in DOCUMENTS for line, text in fenced_blocks(path, language)]


def gpu_usable() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # no cupy, no driver, no device: all mean no GPU here
        return False


@pytest.fixture(scope="module")
def program_cache(request):
    """A garaphpy cache kept between sessions (in pytest's cache folder) for the
    blocks' compiled programs, which are the test processes' own
    (:func:`helpers.cache_with_programs`); the stores the blocks build are removed after."""
    cache = getattr(request.config, "cache", None)
    directory = (cache.mkdir("garaphpy-docs") if cache is not None
                 else Path(request.getfixturevalue("tmp_path_factory").mktemp("docs-cache")))
    yield cache_with_programs(directory)
    for entry in directory.iterdir():
        if entry.name != "programs":
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()


@pytest.fixture
def reader_directory(tmp_path):
    """A working directory as the repository root looks to a reader: examples/."""
    shutil.copytree(REPOSITORY / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("results"))
    return tmp_path


def run_in(directory: Path, cache: Path, *command: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "GARAPHPY_CACHE": str(cache),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY),
                                                               os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *command], cwd=directory, env=environment,
                          capture_output=True, text=True, timeout=600)


def test_the_documents_have_examples():
    readme = REPOSITORY / "README.md"
    assert len(fenced_blocks(readme, "python")) >= 3 and fenced_blocks(readme, "toml")
    assert len(examples("python")) > len(fenced_blocks(readme, "python"))


@pytest.mark.parametrize("path, line, text", examples("python"))
def test_python_example_runs_on_its_own(path, line, text, reader_directory, program_cache):
    if text.splitlines()[0].strip() == GPU_MARKER and not gpu_usable():
        pytest.skip(f"{path.name}:{line} is marked '{GPU_MARKER}' and no GPU is usable here")
    if text.splitlines()[0].strip() == INSTALLED_MARKER and not backend_registered():
        pytest.skip(f"{path.name}:{line} needs the installed package (its NetworkX backend "
                    "entry point); this run has garaphpy on PYTHONPATH only")
    script = reader_directory / f"example_{line}.py"
    script.write_text(text)
    completed = run_in(reader_directory, program_cache, str(script))
    assert completed.returncode == 0, \
        f"{path.name}:{line} exits {completed.returncode}\n{completed.stderr[-3000:]}"


@pytest.mark.parametrize("path, line, text", examples("toml"))
def test_toml_example_runs(path, line, text, reader_directory, program_cache):
    if text.splitlines()[0].strip() == GPU_MARKER and not gpu_usable():
        pytest.skip(f"{path.name}:{line} is marked '{GPU_MARKER}' and no GPU is usable here")
    config = reader_directory / f"example-{line}.toml"
    config.write_text(text)
    completed = run_in(reader_directory, program_cache, "-m", "garaphpy.run", str(config),
                       "--quiet")
    assert completed.returncode == 0, \
        f"{path.name}:{line} exits {completed.returncode}\n{completed.stderr[-3000:]}"
    assert "error" not in completed.stderr.lower(), completed.stderr


def test_every_relative_link_of_the_documents_leads_to_a_file():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for path in DOCUMENTS:
        for target in link.findall(path.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.name}: no {target}"


def test_the_readme_links_every_page_of_docs():
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    for page in (REPOSITORY / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
