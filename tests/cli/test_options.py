"""Run and build options are declared once (garaphpy/options.py): the
configuration schema, garaphpy.run's keywords, Graph.load's options and the
checkpoint identity must all agree with the declarations, so that an option
added or changed in one place and not the others fails here."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import garaphpy
from garaphpy import api, graph as graph_module
from garaphpy.configfile import SCHEMA, Key, validate_config
from garaphpy.errors import ConfigError
from garaphpy.options import (CONFIG_KINDS, BuildOptions, RunOptions, config_values,
                              declared_options, identity_options)
from garaphpy.programs import PageRank
from garaphpy.scheduler import checkpoint
from garaphpy.storage import _build_kernels, layout

OPTION_CLASSES = [RunOptions, BuildOptions]

#: Keys of the [input], [store] and [run] sections that set no run or build
#: option: how the input is read or generated, the store's path, the program.
CONFIG_ONLY_KEYS = {
    ("input", "format"), ("input", "weights"), ("input", "seed"), ("input", "weighted"),
    ("input", "edge_factor"), ("input", "max_weight"), ("store", "path"),
    ("store", "rebuild"), ("store", "verify"), ("run", "program"), ("run", "verify"),
    ("run", "constants"),
}


def _declared(cls):
    return [(cls.__name__, name, default, spec)
            for name, (default, spec) in declared_options(cls).items()]


EVERY_OPTION = _declared(RunOptions) + _declared(BuildOptions)


@pytest.mark.parametrize("owner, name, default, spec", EVERY_OPTION,
                         ids=[f"{owner}.{name}" for owner, name, _, _ in EVERY_OPTION])
def test_every_option_with_a_key_is_that_key(owner, name, default, spec):
    if spec.config is None:
        assert spec.owns_key, f"{owner}.{name} reads no key and owns none"
        return
    assert spec.kind in CONFIG_KINDS
    key = SCHEMA[spec.section][spec.key]
    assert (key.kind, key.choices, key.minimum, key.maximum) == \
        (spec.kind, spec.choices, spec.minimum, spec.maximum)
    if spec.owns_key:
        assert key.default == default
        assert key.help == spec.doc
    else:
        # a key another declaration owns (the run's GPU budget and streams
        # read the store's): unset in the library means that key's default
        assert default is None


def test_every_run_and_store_key_is_a_declared_option_or_config_only():
    declared = {(spec.section, spec.key) for _, _, _, spec in EVERY_OPTION if spec.config}
    keys = {(section, key) for section in ("input", "store", "run") for key in SCHEMA[section]}
    assert keys - declared == CONFIG_ONLY_KEYS
    assert declared <= keys


def test_run_keywords_are_the_run_options():
    parameters = inspect.signature(api.run).parameters
    keywords = {name: parameter.default for name, parameter in parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(parameters) - set(keywords) == {"graph", "program"}
    declared = {name: default for name, (default, _spec) in declared_options(RunOptions).items()}
    assert keywords == declared
    assert garaphpy.run is api.run


def test_run_checks_choices_from_the_declarations():
    assert api.MODES == RunOptions.__dataclass_fields__["mode"].metadata["option"].choices
    assert api.EXECUTIONS == declared_options(RunOptions)["execution"][1].choices
    assert api.DIRECTIONS == declared_options(RunOptions)["direction"][1].choices


def test_graph_constructors_take_the_build_options():
    assert graph_module._BUILD_OPTION_NAMES == {f.name for f in dataclasses.fields(BuildOptions)}
    with pytest.raises(ConfigError, match="unknown option"):
        graph_module._build_options({"n_stream": 3})


def test_store_kernels_read_the_declared_choices():
    assert tuple(_build_kernels.DUPLICATE_POLICIES) == \
        declared_options(BuildOptions)["duplicates"][1].choices
    assert layout.REPLICATION_RULES == declared_options(BuildOptions)["replication_rule"][1].choices


def test_build_options_validate_with_the_declared_choices():
    for name in ("self_loops", "duplicates", "weight_dtype", "replication_rule"):
        with pytest.raises(ConfigError, match=rf"{name}='nope': expected one of "):
            BuildOptions(**{name: "nope"}).validate()
    BuildOptions().validate()


def test_a_configuration_sets_every_option_it_names():
    settings = validate_config({"graph": "rmat:4",
                                "run": {"mode": "cpu", "direction": "pull", "sources": [3],
                                        "checkpoint_every": 0, "host_memory": "1MiB"},
                                "store": {"n_streams": 8, "gpu_memory": "1GiB"},
                                "input": {"self_loops": "drop"}})
    run_options = RunOptions(**config_values(RunOptions, settings))
    assert (run_options.mode, run_options.direction, run_options.sources) == ("cpu", "pull", [3])
    assert (run_options.checkpoint_every, run_options.host_memory) == (0, 1 << 20)
    assert (run_options.n_streams, run_options.gpu_memory) == (8, 1 << 30)
    assert run_options.threads is None and run_options.on_iteration is None
    build = BuildOptions(**config_values(BuildOptions, settings))
    assert (build.self_loops, build.n_streams, build.gpu_memory) == ("drop", 8, 1 << 30)
    assert build.slot_bytes == BuildOptions().slot_bytes
    build.validate()


def test_a_derived_key_keeps_its_messages():
    key = SCHEMA["run"]["mode"]
    assert isinstance(key, Key)
    with pytest.raises(ConfigError, match=r"run.mode: 'gpux' is not one of 'cpu', 'gpu', "
                                          r"'hybrid'"):
        key.validate("gpux", "run.mode")
    with pytest.raises(ConfigError, match=r"run.max_iterations: 2147483648 is above the "
                                          r"maximum 2147483647"):
        validate_config({"graph": "rmat:4", "run": {"max_iterations": 2**31}})


def test_the_checkpoint_identity_is_the_identity_options():
    assert identity_options() == ("execution", "max_iterations", "tolerance", "sources",
                                  "direction")
    resolved = RunOptions(execution="sync", max_iterations=np.int64(7), tolerance=0,
                          sources=np.array([4, 2], np.int64), direction="auto", threads=3,
                          mode="cpu")
    identity = resolved.identity()
    assert identity == {"execution": "sync", "max_iterations": 7, "tolerance": 0.0,
                        "sources": [4, 2], "direction": "auto"}
    assert type(identity["max_iterations"]) is int and type(identity["tolerance"]) is float


def test_a_run_identity_names_every_identity_option():
    graph = garaphpy.Graph.from_arrays([0, 1, 2], [1, 2, 0])
    resolved = RunOptions(execution="sync", max_iterations=5, tolerance=None,
                          sources=np.zeros(0, np.int64))
    identity = checkpoint.run_identity(graph, PageRank(), resolved)
    assert set(identity_options()) <= set(identity)
    changed = dict(identity, direction="pull", tolerance=1e-3)
    differences = checkpoint.identity_differences(identity, changed)
    assert any(d.startswith("direction 'auto'") for d in differences)
    assert any(d.startswith("tolerance None") for d in differences)
