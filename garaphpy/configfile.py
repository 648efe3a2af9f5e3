"""The run configuration: a TOML file, validated, plus ``--set`` overrides.

A configuration names the graph and how to load and store it::

    graph = "graphs/web.txt.gz"        # a file (relative to the config) or "rmat:22", "grid:2000x2000"

    [input]
    directed = true                    # omit: what the input says
    self_loops = "keep"                # keep | drop
    duplicates = "drop"                # keep | drop | min | max | sum

    [store]
    path = "stores/web"                # omit: a cache directory keyed on input and options
    storage_dirs = ["/ssd1", "/ssd2"]  # page data blocks spread over these

Every key is declared once with its type, range and default: the keys that
set a run or build option are made from that option's declaration
(:class:`garaphpy.options.RunOptions`,
:class:`garaphpy.options.BuildOptions`), the others (the graph, its
format and generator, the program, output files) are declared in
:data:`SCHEMA` here.  An unknown section or key, a wrong type or an
out-of-range value is rejected with a :class:`~garaphpy.errors.ConfigError`
naming it.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError
from .options import MAX_ITERATIONS  # noqa: F401  (re-exported: declared here before)
from .options import INT64_MAX, BuildOptions, RunOptions, declared_options

_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2,
               "mb": 1000**2, "mib": 1 << 20, "g": 1000**3, "gb": 1000**3, "gib": 1 << 30,
               "t": 1000**4, "tb": 1000**4, "tib": 1 << 40}


def parse_size(value: Any, name: str) -> int:
    """Bytes from an integer or a string such as ``"512MiB"`` or ``"4 GB"``."""
    if isinstance(value, bool):
        raise ConfigError(f"{name}: expected a size in bytes, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ConfigError(f"{name}: expected a positive size, got {value}")
        if value > INT64_MAX:
            raise ConfigError(f"{name}: {value} is above the maximum {INT64_MAX}")
        return value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", value)
        if match and match.group(2).lower() in _SIZE_UNITS:
            size = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
            size = int(size) if math.isfinite(size) else INT64_MAX + 1
            if 0 < size <= INT64_MAX:
                return size
            if size > INT64_MAX:
                raise ConfigError(f"{name}: {value!r} is above the maximum {INT64_MAX} bytes")
    raise ConfigError(f"{name}: expected a size such as 1073741824 or \"4GiB\", got {value!r}")


@dataclass(frozen=True)
class Key:
    """One configuration key: its type, check and default."""

    kind: str
    default: Any = None
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any, str], Any] | None = None
    help: str = ""

    @classmethod
    def from_option(cls, default: Any, declared) -> "Key":
        """The key of a declared option (:class:`garaphpy.options.Option`)."""
        return cls(declared.kind, default, choices=declared.choices, minimum=declared.minimum,
                   maximum=declared.maximum, help=declared.doc)

    def validate(self, value: Any, name: str) -> Any:
        expected = {"str": str, "bool": bool, "int": int, "float": (int, float),
                    "list[str]": list, "table": dict}.get(self.kind)
        if self.kind == "size":
            return parse_size(value, name)
        if self.kind == "bool|none":
            if value is None or isinstance(value, bool):
                return value
            raise ConfigError(f"{name}: expected true or false, got {value!r}")
        if self.kind == "bool|auto":
            if isinstance(value, bool) or value == "auto":
                return value
            raise ConfigError(f"{name}: expected true, false or \"auto\", got {value!r}")
        if self.kind == "ids":
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, int) and not isinstance(v, bool)
                                     and -INT64_MAX - 1 <= v <= INT64_MAX for v in values):
                raise ConfigError(f"{name}: expected a vertex id or a list of vertex ids, "
                                  f"got {value!r}")
            return values
        if self.kind == "float|none":
            if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                 and abs(value) <= INT64_MAX and not math.isnan(value)):
                if value is not None and self.minimum is not None and value < self.minimum:
                    raise ConfigError(f"{name}: {value} is below the minimum {self.minimum}")
                return None if value is None else float(value)
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if expected is None:  # pragma: no cover - a schema mistake
            raise AssertionError(self.kind)
        if isinstance(value, bool) and self.kind != "bool":
            raise ConfigError(f"{name}: expected {self.kind}, got {value!r}")
        if not isinstance(value, expected):
            raise ConfigError(f"{name}: expected {self.kind}, got {type(value).__name__} "
                              f"{value!r}")
        if self.kind == "list[str]" and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name}: expected a list of strings, got {value!r}")
        if self.kind == "table" and not all(
                isinstance(v, (int, float)) and not isinstance(v, bool)
                and not (isinstance(v, int) and abs(v) > INT64_MAX) for v in value.values()):
            raise ConfigError(f"{name}: expected a table of numbers, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{name}: {value!r} is not one of "
                              f"{', '.join(repr(c) for c in self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{name}: {value} is below the minimum {self.minimum}")
        maximum = self.maximum
        if maximum is None and self.kind == "int":
            maximum = INT64_MAX
        if maximum is not None and value > maximum:
            raise ConfigError(f"{name}: {value} is above the maximum {maximum}")
        if self.check is not None:
            value = self.check(value, name)
        return value


def option_keys(section: str, option_class, after: str | None = None,
                through: str | None = None) -> dict[str, Key]:
    """The keys of ``section`` made from the options of ``option_class`` that
    own one, in field order; ``after``/``through`` keep only those after, or
    up to and including, the option of that name (to place other keys
    between them)."""
    keys, started, ended = {}, after is None, False
    for name, (default, declared) in declared_options(option_class).items():
        if started and not ended and declared.section == section and declared.owns_key:
            keys[declared.key] = Key.from_option(default, declared)
        started = started or name == after
        ended = ended or name == through
    return keys


#: Section name -> key -> Key.  "" is the top level.
SCHEMA: dict[str, dict[str, Key]] = {
    "": {
        "graph": Key("str", help="input file, or a generator: rmat:SCALE[:EDGE_FACTOR], grid:WxH"),
    },
    "input": {
        "format": Key("str", "auto", choices=("auto", "snap", "el", "wel", "mtx", "gr", "sg",
                                              "wsg", "bcsr", "bwcsr")),
        **option_keys("input", BuildOptions),
        "weights": Key("str", "file", choices=("file", "unit", "hash"),
                       help="edge weights: the input's own, 1 per edge, or 1..max_weight "
                            "hashed from the edge's ids (weighted programs on unweighted "
                            "files)"),
        # generators only (max_weight also with weights = "hash"); unset: the default
        "seed": Key("int", None, minimum=0, maximum=2**63 - 1),
        "weighted": Key("bool|none", None),
        "edge_factor": Key("int", None, minimum=1, maximum=1 << 16),
        "max_weight": Key("int", None, minimum=1, maximum=2**31 - 1),
    },
    "store": {
        "path": Key("str", None),
        **option_keys("store", BuildOptions),
        "rebuild": Key("bool", False),
        "verify": Key("str", "auto", choices=("auto", "full", "quick", "sizes", "none"),
                      help="how a reused store is checked: auto (every checksum the first "
                           "time, the files' sizes while unchanged since), full, quick, "
                           "sizes, none"),
    },
    "run": {
        "program": Key("str", None, help="a built-in program: pagerank, sssp, bfs, cc, ..."),
        **option_keys("run", RunOptions, through="direction"),
        "verify": Key("bool", False),
        "constants": Key("table", {}),
        **option_keys("run", RunOptions, after="direction"),
    },
    "output": {
        "values": Key("str", None, help="file for vertex values: .txt (id value per line) "
                                        "or .npy; default results/<graph>.<program>.txt"),
        "iterations": Key("str", None, help="file for per-iteration records (JSON lines); "
                                            "default beside the values"),
    },
}

#: Keys that name files; relative paths are taken from the config's directory.
_PATH_KEYS = {("store", "path"), ("store", "storage_dirs"), ("output", "values"),
              ("output", "iterations"), ("run", "checkpoint_dir")}


def user_path(value: str, key: str, base_dir: Path | None = None) -> str:
    """The absolute path a path key names: ``~`` expanded first, then joined
    to ``base_dir`` (the config's directory) when relative.

    Symbolic links are kept, not resolved: a link at an output path is
    replaced, never written through, and a link at ``store.path`` is refused.

    Raises
    ------
    ConfigError
        Naming ``key``: a NUL byte in the path, or ``~user`` of no such user.
    """
    if "\0" in value:
        raise ConfigError(f"{key}: the path contains a NUL byte")
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        raise ConfigError(f"{key}: {value!r}: cannot expand '~' (no such user or home "
                          "directory)") from None
    if base_dir is not None:
        path = base_dir / path
    return os.path.abspath(path)


def _parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. store.n_streams=8")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {text!r}: empty key")
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word: a string
    except (RecursionError, ValueError) as error:
        raise ConfigError(f"--set {key}: {_beyond_toml(error)}") from None
    return key, value


def _beyond_toml(error: Exception, text: str = "") -> str:
    """What a TOML text the parser cannot hold has (nesting or an integer's
    digits), with the line and key where they can be found."""
    if isinstance(error, RecursionError):
        what, pattern = "arrays or tables nested too deeply to read", r"[\[{]{64}"
    else:
        what, pattern = f"a number too long to read ({str(error).split(':')[0]})", r"\d{4300}"
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            key = re.match(r"\s*([A-Za-z0-9_.\"-]+)\s*=", line)
            return f"line {number}{' (' + key.group(1) + ')' if key else ''}: {what}"
    return what


#: Leading bytes of compressed files (gzip, bzip2, xz, zstd).
_COMPRESSED_MAGICS = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")
_GRAPH_SUFFIXES = {".el", ".wel", ".mtx", ".mm", ".gr", ".sg", ".wsg", ".bcsr", ".bwcsr",
                   ".snap", ".gz", ".gzip", ".bz2", ".xz", ".zst"}


def _not_a_config(path: Path, content: bytes) -> str:
    """A hint when a configuration file is a graph file instead ("" otherwise)."""
    if path.suffix.lower() in _GRAPH_SUFFIXES or content.startswith(_COMPRESSED_MAGICS) \
            or b"\x00" in content[:4096]:
        return ("this looks like a graph file, not a TOML configuration (name the graph "
                "in one: graph = \"FILE\"): ")
    return ""


def load_config(path, overrides: list[str] | tuple = ()) -> dict:
    """Read, override and validate a configuration file.

    Parameters
    ----------
    path : str or os.PathLike
        The TOML file.
    overrides : list of str
        ``KEY=VALUE`` items (``store.n_streams=8``, ``graph=rmat:16``); the
        value is read as TOML, or taken as a string when it is not TOML.

    Returns
    -------
    dict
        ``{section: {key: value}}`` with every default filled in and paths
        resolved; the top-level keys under ``""``.

    Raises
    ------
    ConfigError
        Naming the file, the section and key, and what is wrong.
    """
    path = Path(path)
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror})") from None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {_not_a_config(path, content)}not UTF-8 text (byte "
                          f"{error.start}); expected a TOML configuration") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {_not_a_config(path, content)}invalid TOML: "
                          f"{error}") from None
    except (RecursionError, ValueError) as error:
        raise ConfigError(f"{path}: {_beyond_toml(error, text)}") from None
    apply_overrides(raw, overrides)
    return validate_config(raw, base_dir=path.parent, origin=str(path))


def apply_overrides(raw: dict, overrides: list[str] | tuple) -> dict:
    """Set ``KEY=VALUE`` items (``--set``) in a raw configuration, in place.

    The value is read as TOML, or taken as a string when it is not TOML;
    dotted keys name sections.  Returns ``raw``, still to be validated
    (:func:`validate_config`).
    """
    for item in overrides:
        key, value = _parse_override(item)
        *sections, name = key.split(".")
        table = raw
        for section in sections:
            table = table.setdefault(section, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {item}: {section} is not a section")
        table[name] = value
    return raw


def validate_config(raw: dict, base_dir: Path | None = None, origin: str = "<config>") -> dict:
    """Validate a configuration given as nested dicts; see :func:`load_config`."""
    result: dict[str, dict[str, Any]] = {section: {} for section in SCHEMA}
    for name, value in raw.items():
        if isinstance(value, dict) and name != "":
            if name not in SCHEMA or name == "":
                raise ConfigError(f"{origin}: unknown section [{name}] (known: "
                                  f"{', '.join('[' + s + ']' for s in SCHEMA if s)})")
            for key, item in value.items():
                if isinstance(item, dict) and SCHEMA[name].get(key, Key("str")).kind != "table":
                    raise ConfigError(f"{origin}: unknown section [{name}.{key}]")
                if key not in SCHEMA[name]:
                    raise ConfigError(f"{origin}: unknown key {name}.{key} (known in [{name}]: "
                                      f"{', '.join(SCHEMA[name])})")
                result[name][key] = SCHEMA[name][key].validate(item, f"{origin}: {name}.{key}")
        else:
            if name not in SCHEMA[""]:
                hint = f" (did you mean [{name}]?)" if name in SCHEMA else ""
                raise ConfigError(f"{origin}: unknown key {name!r}{hint}")
            result[""][name] = SCHEMA[""][name].validate(value, f"{origin}: {name}")
    for section, keys in SCHEMA.items():
        for key, spec in keys.items():
            result[section].setdefault(key, spec.default)
    if result[""]["graph"] is None:
        raise ConfigError(f"{origin}: missing key 'graph' (a file or a generator such as "
                          "\"rmat:16\")")
    if "\0" in result[""]["graph"]:
        raise ConfigError(f"{origin}: graph: the path contains a NUL byte")
    if base_dir is not None:
        for section, key in _PATH_KEYS:
            value = result[section][key]
            name = f"{origin}: {section + '.' if section else ''}{key}"
            if isinstance(value, str):
                result[section][key] = user_path(value, name, base_dir)
            elif isinstance(value, list):
                result[section][key] = [user_path(v, name, base_dir) for v in value]
        result["_base_dir"] = str(base_dir)
    return result
