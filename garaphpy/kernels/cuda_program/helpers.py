"""The device helper library: Python's semantics in CUDA C++ (Garaph section 2.3).

One vertex program runs on both processors (section 2.3): compiled by numba
on the CPU (section 4) and translated for the GPU pull kernel (sections
3.1-3.2).  Where C++ and Python disagree (floor ``//`` and ``%``, ``**``,
wrapping integer arithmetic, ``min``/``max`` under ties and NaN, unfused
products) the translated code calls a ``gp_py_*`` helper that computes what
numba computes.  The helpers' CUDA C++ lives in
``kernels/cuda/python_semantics.cu`` (package data), cut into sections at
``//@ NAME`` lines; a :class:`HelperLibrary` fills the sections a translation
unit asks for and emits each helper once, dependencies first.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path

_LIBRARY_PATH = Path(__file__).parent.parent / "cuda" / "python_semantics.cu"
_SECTION_MARKER = "//@ "


@functools.cache
def _sections() -> dict[str, string.Template]:
    """The sections of the library file, by name, as templates of their ``${field}``s."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in _LIBRARY_PATH.read_text().splitlines():
        if line.startswith(_SECTION_MARKER):
            current = line[len(_SECTION_MARKER):].split(":", 1)[0].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {name: string.Template("\n".join(lines).rstrip("\n") + "\n")
            for name, lines in sections.items()}


def section(section_name: str, /, **fields: str) -> str:
    """The library's section ``section_name`` with its ``${field}``s filled in.

    Raises
    ------
    KeyError
        No such section, or a field the section has is not given.
    """
    return _sections()[section_name].substitute(fields)


class HelperLibrary:
    """The helpers one translation unit uses, each emitted once, in first-use order.

    A helper's dependencies are asked for before it (``gp_py_pow_loop``
    before ``gp_py_pow``), so first-use order defines them before their use.
    """

    def __init__(self):
        self.used: dict[str, str] = {}

    def use(self, name: str, definition: str) -> None:
        """Emit ``definition`` under ``name`` unless a helper of that name is in already."""
        self.used.setdefault(name, definition)

    def source(self) -> str:
        """The CUDA C++ of every helper used."""
        return "\n".join(self.used.values())

    # -- the helpers ------------------------------------------------------------
    def wrapping(self, name: str) -> None:
        """``gp_py_add``, ``gp_py_sub`` or ``gp_py_mul`` on int64, wrapping."""
        operators = {"add": "+", "sub": "-", "mul": "*"}
        self.use(f"gp_py_{name}", section("signed_wrap", name=name, op=operators[name]))

    def float_multiply(self, c_type: str) -> None:
        """``gp_py_mul`` on ``float`` or ``double``, never fused into a multiply-add."""
        intrinsic = "__fmul_rn" if c_type == "float" else "__dmul_rn"
        self.use(f"gp_py_mul_{c_type}", section("float_multiply", t=c_type,
                                                intrinsic=intrinsic))

    def negate(self) -> None:
        """``gp_py_neg`` on int64, wrapping."""
        self.use("gp_py_neg", section("negate"))

    def absolute(self) -> None:
        """``gp_py_abs`` on integers, wrapping."""
        self.use("gp_py_abs", section("absolute"))

    def minmax(self, name: str, comparison: str) -> None:
        """``gp_py_min`` or ``gp_py_max``: ``b`` when ``b COMPARISON a``, else ``a``."""
        self.use(f"gp_py_{name}", section("minmax", name=name, op=comparison))

    def infinity(self) -> None:
        """``gp_py_inf()``: +inf as a double."""
        self.use("gp_py_inf", section("infinity"))

    def floor_division(self, kind: str, c_type: str) -> None:
        """``gp_py_floordiv`` and ``gp_py_mod`` for numpy kind ``kind`` ('i', 'u' or 'f')."""
        if kind == "i":
            self.use("gp_py_divmod_signed", section("signed_divmod"))
        elif kind == "u":
            self.use("gp_py_divmod_unsigned", section("unsigned_divmod"))
        else:
            suffix = "f" if c_type == "float" else ""
            self.use(f"gp_py_divmod_{c_type}", section(
                "float_divmod", t=c_type, fmod=f"fmod{suffix}", floor=f"floor{suffix}",
                zero=f"0.0{suffix}", half=f"0.5{suffix}"))

    def power(self, c_type: str, kind: str, signed_exponent: bool) -> None:
        """``gp_py_pow`` of a ``c_type`` base (numpy kind ``kind``) and an int64
        (``signed_exponent``) or uint64 exponent: numba's ``int_power``."""
        exponent = "long long" if signed_exponent else "unsigned long long"
        self.use("gp_py_pow_loop", section("power_loop"))
        if kind in "iu":
            negative = section("negative_exponent") if signed_exponent else ""
            definition = section("integer_power", t=c_type, e=exponent, negative=negative)
        elif signed_exponent:
            definition = section("float_power", t=c_type, e=exponent,
                                 magnitude=section("signed_magnitude"),
                                 result=f"invert ? ({c_type})(1.0 / (double)result) : result")
        else:
            definition = section("float_power", t=c_type, e=exponent,
                                 magnitude=section("unsigned_magnitude"), result="result")
        self.use(f"gp_py_pow {c_type} {exponent}", definition)
