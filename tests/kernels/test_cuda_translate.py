"""The CUDA translation of vertex programs (garaphpy.kernels.cuda_program; Garaph section 2.3).

Four kinds of checks need no GPU:

1. golden text of small translations (readable, deterministic);
2. execution equivalence: the generated source is compiled as *host* C++
   by g++ behind a small prelude that stands in for ``__device__`` and the
   CUDA intrinsics and atomics, loaded with ctypes, and every entry point is
   compared with the numba-compiled CpuProgram on random inputs (zeros,
   negative and extreme integers, infinities, NaN) -- for every built-in
   program and for synthetic programs that exercise each construct and type
   combination, and for every sum monoid on every accumulator type;
3. the device code of every program compiles with ``nvcc -arch=sm_90`` inside
   a kernel that calls every function (atomics on shared and global memory
   for every monoid and accumulator type), and through cupy.RawModule where
   cupy is installed;
4. refusals: untranslatable constructs fail at class definition with their
   file and line.

One more, marked ``gpu``, runs the same comparison on the device, with the
atomics under contention (4 blocks of 256 threads on 7 slots).
"""

from __future__ import annotations

import ctypes
import inspect
import math
import re
import shutil
import subprocess
import textwrap
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import ConfigError
from garaphpy.kernels.cpu import exact_sum
from garaphpy.kernels.cpu_program import compile_program
from garaphpy.kernels.cuda_program import CudaProgram, check_translatable, ctype, \
    translate_program
from garaphpy.program import ProgramError, VertexProgram, monoid_identity
from garaphpy.programs import BUILTIN_PROGRAMS, SSSP

SAMPLES = 160
NUM_VERTICES = 40


# ------------------------------------------------------------ synthetic programs --
# Functions shared by the synthetic programs; a program varies them by dtype.
def identity_gather(src):
    return src


def keep_accum(accum):
    return accum


def changed(new, old):
    return new != old


def vertex_init(vertex):
    return vertex


def arithmetic_gather(src, weight):
    return src * weight - src / (weight * weight + 1) + 2 * src - weight


def arithmetic_apply(value, accum, iteration):
    return value // 3 + accum % 7 - iteration ** 2 + -value + +accum


def arithmetic_activate(new, old):
    return new - old > 0.5


def arithmetic_init(vertex, num_vertices, out_degree):
    return vertex % 5 - num_vertices // 4 + out_degree * 3


def division_gather(src, weight):
    return src // weight + src % weight


def division_apply(value, accum, in_degree):
    return value / accum - accum // -3 + value % -2.5 + in_degree / 2


def unsigned_apply(value, accum, iteration):
    return value * accum + value // 3 - accum % 7 + iteration ** 2 - -value


def power_gather(src, weight):
    return src ** 2 + weight ** 3 - src ** -1 + 2 ** 0.5 + 1.1 ** 3 + (-2) ** 2


def power_apply(value, accum):
    return value ** accum + math.pow(value, 2) - math.pow(accum, 0.5)


def power_init(vertex, in_degree):
    return in_degree ** vertex


def logic_gather(src, dst, weight):
    return (src < weight <= dst) or (not src and weight) or dst


def logic_apply(value, accum, is_source, iteration):
    return value if is_source and accum > value else accum if iteration % 2 else -accum


def logic_activate(new, old):
    return new > old or new != old and not new == new


def logic_init(is_source, vertex):
    return vertex if is_source else 0 if vertex > 0 else -1


def branches_apply(value, accum, iteration):
    x = value + 1
    if accum > x:
        y = accum * 2
        x = 0.5
    elif accum < -x:
        y = accum - 1
    else:
        y = 3
        if iteration > 5:
            return y
        y = y + iteration
    y += 1
    return x * y


def returns_gather(src, weight):
    if src > weight:
        return 1
    if src < weight:
        return weight
    return True


def ssa_init(vertex):
    x = vertex
    y = x // 7
    x = 0.25
    z = y * x
    x = y > 3
    return z + x


def minmax_gather(src, weight, src_out_degree, dst_in_degree):
    return max(src, weight, src_out_degree) - min(weight, dst_in_degree) + abs(src) + min(src, 2.5)


def casts_apply(value, accum, weighted_in_degree):
    return float(value) + bool(accum) + int(weighted_in_degree) - abs(int(accum)) + \
        max(bool(value), accum)


def math_apply(value, accum):
    a = math.exp(value / 8) + math.log(abs(accum) + 1) + math.sqrt(abs(value)) + math.sin(accum)
    b = math.cos(value) + math.tan(accum / 4) + math.tanh(value) + math.atan(accum)
    c = math.expm1(value / 16) + math.log1p(abs(accum)) + math.erf(value) + math.hypot(value, 3)
    d = math.copysign(2.0, accum) + math.log2(abs(value) + 2) + math.log10(abs(accum) + 3)
    return a + b + c + d + math.fabs(value) * math.pi - math.e


def math_init(vertex, weighted_in_degree):
    if math.isinf(weighted_in_degree) or math.isnan(weighted_in_degree):
        return math.floor(vertex / 3) + math.ceil(vertex / 7) + math.isnan(vertex)
    if -1e9 < weighted_in_degree < 1e9:
        return math.floor(weighted_in_degree) - math.ceil(-weighted_in_degree / 3)
    return math.inf


def total_value(value, out_degree):
    return value * out_degree


def smallest_vertex(vertex, value):
    return vertex if value > 0 else 1e9


def largest_in(in_degree, iteration, weighted_in_degree, is_source, num_vertices):
    return in_degree + iteration - weighted_in_degree + is_source * num_vertices


def aggregates_apply(value, accum, total, smallest, largest):
    return value + accum + total - smallest * largest


def constants_gather(src, weight):
    return src * scale + offset + (weight if big > 0 else tiny)


def constants_apply(value, accum):
    limit = 3
    if limit > 2:
        y = accum
    if not big:
        z = 1
    else:
        z = 2
    return y * z + (True and value) + (False or accum) - 1 + 2 ** 0.5 + (7 // -2) + (not 0)


def keywords_apply(value, accum):
    double = value + accum
    exp = math.exp(0.5)
    α = double * exp
    new = α - 1
    exp = new > 0
    return new + exp


@dataclass
class Case:
    """A program, the dtypes it is translated with and the inputs it is tried on."""

    id: str
    program: VertexProgram
    weight_dtype: object = np.float64
    degree_dtype: object = np.int32
    #: "full" (extremes, inf, NaN), "finite" (no inf/NaN, moderate magnitudes), "small"
    domain: str = "full"
    #: tolerance in units in the last place (transcendental functions only)
    ulps: int = 0
    only_combine: bool = False
    translated: CudaProgram = field(init=False, default=None)


def make_program(name, *, value, accum=None, sum="add", gather=identity_gather,
                 apply=keep_accum, activate=changed, init=vertex_init, aggregates=None,
                 constants=None, **instance_constants):
    namespace = {"value_dtype": value, "accum_dtype": accum, "sum": sum, "gather": gather,
                 "apply": apply, "activate": activate, "init": init,
                 "aggregates": aggregates or {}, "constants": constants or {}}
    cls = type(name, (VertexProgram,), namespace)
    return cls(**instance_constants)


def synthetic_cases() -> list[Case]:
    f32, f64, i8, i16, i32, i64 = np.float32, np.float64, np.int8, np.int16, np.int32, np.int64
    u8, u16, u32, u64, b = np.uint8, np.uint16, np.uint32, np.uint64, np.bool_
    cases = []
    # signed 64-bit overflow is undefined in numba (LLVM nsw): "finite" keeps int64 sums exact
    for value, weight, domain in ((i32, i32, "full"), (i64, f64, "finite"), (f32, i32, "full"),
                                  (f64, f32, "full"), (b, i64, "finite"), (i8, i16, "full")):
        cases.append(Case(f"arithmetic-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "Arithmetic", value=value, gather=arithmetic_gather, apply=arithmetic_apply,
            activate=arithmetic_activate, init=arithmetic_init), weight, domain=domain))
    for value, weight in ((i64, i64), (i32, f32), (f64, i32), (f32, f32)):
        cases.append(Case(f"division-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "Division", value=value, gather=division_gather, apply=division_apply), weight,
            np.int64))
    # unsigned values: integer results only (a negative float cast to unsigned is undefined)
    for value, weight, domain in ((u64, u64, "full"), (u32, u16, "full"), (u64, i64, "finite"),
                                  (u8, u8, "full")):
        cases.append(Case(f"unsigned-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "Unsigned", value=value, gather=division_gather, apply=unsigned_apply,
            activate=arithmetic_activate), weight, domain=domain))
    for value, weight in ((i64, i32), (f32, i64), (f64, f64), (b, i32)):
        # pow with a float exponent is a transcendental function (CUDA's is within 2 ulps)
        cases.append(Case(f"power-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "Power", value=value, gather=power_gather, apply=power_apply, init=power_init),
            weight, domain="small", ulps=1))
    for value, weight in ((f64, i32), (i32, f32), (b, f64)):
        cases.append(Case(f"logic-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "Logic", value=value, gather=logic_gather, apply=logic_apply,
            activate=logic_activate, init=logic_init), weight))
    for value, accum in ((i64, f64), (f32, f32), (i32, i64)):
        cases.append(Case(f"branches-{np.dtype(value)}-{np.dtype(accum)}", make_program(
            "Branches", value=value, accum=accum, gather=returns_gather, apply=branches_apply,
            init=ssa_init), np.int32 if value is i64 else np.float64))
    for value, weight in ((f32, i64), (i64, f64), (u16, f32)):
        cases.append(Case(f"minmax-{np.dtype(value)}-{np.dtype(weight)}", make_program(
            "MinMax", value=value, gather=minmax_gather, apply=casts_apply), weight,
            domain="finite"))
    for value in (f64, f32):
        cases.append(Case(f"math-{np.dtype(value)}", make_program(
            "Math", value=value, apply=math_apply, init=math_init), ulps=1, domain="finite"))
    for value in (f64, i32):
        aggregates = {"total": ("add", total_value), "smallest": ("min", smallest_vertex),
                      "largest": ("max", largest_in)}
        cases.append(Case(f"aggregates-{np.dtype(value)}", make_program(
            "Aggregating", value=value, apply=aggregates_apply, aggregates=aggregates)))
    constants = {"scale": 2.5, "offset": -3, "big": 2 ** 40, "tiny": 1e-300}
    cases.append(Case("constants", make_program(
        "Constants", value=f64, gather=constants_gather, apply=constants_apply,
        constants=constants)))
    cases.append(Case("constants-overridden", make_program(
        "Constants", value=i64, gather=constants_gather, apply=constants_apply,
        constants=constants, scale=-0.75, big=0, offset=9), np.int64))
    cases.append(Case("keywords", make_program("Keywords", value=f32, apply=keywords_apply,
                                               activate=changed)))
    return cases


def monoid_cases() -> list[Case]:
    """Every sum monoid on every accumulator type: combine and its atomic."""
    cases = []
    for dtype in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                  np.uint32, np.uint64, np.float32, np.float64):
        for monoid in ("add", "min", "max"):
            program = make_program("Monoid", value=dtype, sum=monoid)
            cases.append(Case(f"monoid-{monoid}-{np.dtype(dtype)}", program, only_combine=True))
    return cases


def builtin_cases() -> list[Case]:
    return [Case(f"builtin-{name}", cls(), np.float64 if name != "bfs" else np.float32,
                 np.int32 if name != "cc" else np.int64, ulps=1 if name == "nn" else 0)
            for name, cls in BUILTIN_PROGRAMS.items()]


CASES = builtin_cases() + synthetic_cases() + monoid_cases()
for _case in CASES:
    _case.translated = translate_program(_case.program, weight_dtype=_case.weight_dtype,
                                         degree_dtype=_case.degree_dtype)


# ------------------------------------------------------------------- 1. golden --
def test_sssp_translates_to_this_source():
    lines = {role: SSSP.functions[role].first_line
             for role in ("init", "gather", "apply", "activate")}
    expected = textwrap.dedent(f"""\
        // garaphpy: the vertex program SSSP as CUDA C++ device functions
        // (Garaph section 2.3; numba's semantics, see garaphpy/kernels/cuda_program/).
        // value float64, accum float64, weight float64, degree int32, sum = min. Generated; do not edit.

        typedef double value_t;
        typedef double accum_t;
        typedef double weight_t;
        typedef int degree_t;

        struct gp_attrs {{
            const degree_t* out_degree;
            const degree_t* in_degree;
            const double* weighted_in_degree;
            const long long* vertex;
            const bool* is_source;
        }};

        #define GP_NUM_AGGREGATES 0

        // ---- Python's semantics (numba's lowering)
        __device__ __forceinline__ double gp_py_inf() {{
            return __longlong_as_double(0x7ff0000000000000LL);
        }}

        template <class T>
        __device__ __forceinline__ T gp_py_min(T a, T b) {{
            return b < a ? b : a;
        }}

        // ---- the program's functions
        // SSSP.init (sssp.py:{lines['init']})
        __device__ __forceinline__ double gp_user_init(bool is_source) {{
            return is_source ? 0.0 : gp_py_inf();
        }}

        // SSSP.gather (sssp.py:{lines['gather']})
        __device__ __forceinline__ double gp_user_gather(double src, double weight) {{
            return src + weight;
        }}

        // SSSP.apply (sssp.py:{lines['apply']})
        __device__ __forceinline__ double gp_user_apply(double value, double accum) {{
            return gp_py_min(value, accum);
        }}

        // SSSP.activate (sssp.py:{lines['activate']})
        __device__ __forceinline__ bool gp_user_activate(double new_, double old) {{
            return new_ < old;
        }}

        // ---- the engine's entry points
        __device__ __forceinline__ accum_t gp_accum_identity() {{
            return gp_py_inf();
        }}

        __device__ __forceinline__ accum_t gp_gather(const value_t* values, const weight_t* weights,
                                                     const gp_attrs& attrs, long long u, long long v,
                                                     long long e) {{
            return gp_user_gather(values[u], weights[e]);
        }}

        __device__ __forceinline__ value_t gp_apply(const gp_attrs& attrs, const double* aggregates,
                                                    long long num_vertices, long long iteration,
                                                    long long v, value_t value, accum_t accum) {{
            return gp_user_apply(value, accum);
        }}

        __device__ __forceinline__ bool gp_activate(value_t new_value, value_t old_value) {{
            return gp_user_activate(new_value, old_value);
        }}

        __device__ __forceinline__ value_t gp_init(const gp_attrs& attrs, long long num_vertices,
                                                   long long v) {{
            return gp_user_init(attrs.is_source[v]);
        }}

        // the sum monoid (min), cast to accum_t
        __device__ __forceinline__ accum_t gp_combine(accum_t a, accum_t b) {{
            return a <= b ? a : b;
        }}

        __device__ __forceinline__ void gp_atomic_combine(accum_t* address, accum_t x) {{
            // no hardware min on floating point: compare-and-swap the bit pattern
            unsigned long long* word = (unsigned long long*)address;
            unsigned long long seen = *word, assumed;
            do {{
                assumed = seen;
                const accum_t updated = gp_combine(__longlong_as_double((long long)assumed), x);
                const unsigned long long replacement = (unsigned long long)__double_as_longlong(updated);
                if (replacement == assumed) return;
                seen = atomicCAS(word, assumed, replacement);
            }} while (seen != assumed);
        }}

        __device__ __forceinline__ void gp_aggregate(const value_t* values, const gp_attrs& attrs,
                                                     long long num_vertices, long long iteration,
                                                     long long v, double* out) {{
        }}

        __device__ __forceinline__ double gp_aggregate_identity(int i) {{
            (void)i;
            return 0.0;
        }}
        """)
    assert translate_program(SSSP()).source == expected


def _function_text(source: str, name: str) -> str:
    """The definition of device function ``name`` in ``source``, comment line included."""
    start = source.index(f" {name}(")
    start = source.rindex("\n//", 0, start) + 1
    return source[start:source.index("\n}\n", start) + 3]


def _line(function) -> int:
    return inspect.getsourcelines(function)[1]


def test_branches_become_typed_locals_with_joins():
    case = next(c for c in CASES if c.id == "branches-int64-float64")
    text = _function_text(case.translated.source, "gp_user_apply")
    assert text == textwrap.dedent(f"""\
        // Branches.apply (test_cuda_translate.py:{_line(branches_apply)})
        __device__ __forceinline__ double gp_user_apply(long long value, double accum,
                                                        long long iteration) {{
            long long x;
            double y;
            double x_1;
            double y_1;
            long long y_2;
            x = gp_py_add(value, 1LL);
            if (accum > (double)x) {{
                y = gp_py_mul(accum, 2.0);
                x_1 = 0.5;
            }} else {{
                if (accum < (double)gp_py_neg(x)) {{
                    y_1 = accum - 1.0;
                }} else {{
                    y_2 = 3LL;
                    if (iteration > 5LL) {{
                        return (double)y_2;
                    }}
                    y_2 = gp_py_add(y_2, iteration);
                    y_1 = (double)y_2;
                }}
                x_1 = (double)x;
                y = y_1;
            }}
            y = y + 1.0;
            return gp_py_mul(x_1, y);
        }}
        """)


def test_constants_are_named_literals_and_constant_branches_are_pruned():
    case = next(c for c in CASES if c.id == "constants")
    source = case.translated.source
    assert _function_text(source, "gp_user_gather") == textwrap.dedent(f"""\
        // Constants.gather (test_cuda_translate.py:{_line(constants_gather)})
        __device__ __forceinline__ double gp_user_gather(double src, double weight) {{
            const double scale = 2.5;
            const long long offset = (-3LL);
            return gp_py_mul(src, scale) + (double)offset + weight;
        }}
        """)
    # limit > 2 and `not big` are decided by constants: numba prunes those branches (so y is
    # assigned on every path left); 2 ** 0.5, 7 // -2 and not 0 are folded by CPython
    assert _function_text(source, "gp_user_apply") == textwrap.dedent(f"""\
        // Constants.apply (test_cuda_translate.py:{_line(constants_apply)})
        __device__ __forceinline__ double gp_user_apply(double value, double accum) {{
            long long limit;
            double y;
            long long z;
            limit = 3LL;
            y = accum;
            z = 2LL;
            return gp_py_mul(y, (double)z) + value + accum - 1.0 + 1.4142135623730951 + (-4.0) + 1.0;
        }}
        """)
    overridden = next(c for c in CASES if c.id == "constants-overridden").translated.source
    assert "const double scale = (-0.75);" in overridden
    # big = 0 takes the other side of both constant conditions
    assert "const double tiny = 1e-300;" in overridden and "z = 1LL;" in overridden
    assert "const long long big" not in overridden


def test_translation_is_deterministic_and_keyed_by_its_source():
    first = translate_program(SSSP())
    second = translate_program(SSSP())
    assert first.source == second.source and first.key == second.key
    assert len(first.key) == 64
    other = translate_program(SSSP(), weight_dtype=np.int32, degree_dtype=np.int64)
    assert other.key != first.key
    assert "typedef int weight_t;" in other.source and "typedef long long degree_t;" in other.source
    assert first.uses == frozenset({"is_source", "src", "weight", "value", "accum", "new", "old"})
    assert first.aggregate_monoids == () and first.accum_alignment == 8


def test_a_translation_is_kept_for_the_same_class_constants_and_dtypes(monkeypatch):
    """A GPU run's set-up translates its program each time; the same class,
    constants and dtypes take the kept translation, with the run's own
    instance, and anything else translates again."""
    from garaphpy.kernels.cuda_program import build
    from garaphpy.programs import PageRank

    monkeypatch.setattr(build, "_TRANSLATED", {})
    calls = []
    translate = build._translate
    monkeypatch.setattr(build, "_translate", lambda *a: calls.append(a[1]) or translate(*a))
    first, second = PageRank(), PageRank()
    kept = translate_program(first)
    again = translate_program(second)
    assert len(calls) == 1 and again.program is second and kept.program is first
    assert again.source == kept.source and again.key == kept.key
    damped = PageRank(damping=0.5)
    other = translate_program(damped)
    assert len(calls) == 2 and other.key != kept.key and other.program is damped
    translate_program(second, weight_dtype=np.float32)
    assert len(calls) == 3
    monkeypatch.setattr(build, "TRANSLATED_KEPT", 2)
    translate_program(SSSP())                       # the oldest goes
    assert len(build._TRANSLATED) == 2
    translate_program(PageRank())
    assert len(calls) == 5


def test_ctype_names_the_cuda_scalar_types():
    assert [ctype(t) for t in (np.float64, np.float32, np.int64, np.int32, np.int16, np.int8,
                               np.uint64, np.uint32, np.uint8, np.bool_)] == [
        "double", "float", "long long", "int", "short", "signed char", "unsigned long long",
        "unsigned int", "unsigned char", "bool"]
    with pytest.raises(ProgramError, match="float16"):
        ctype(np.float16)


# ------------------------------------------------- 2. execution equivalence (g++) --
_HOST_PRELUDE = r"""
// Host stand-ins for the CUDA qualifiers, intrinsics and atomics the generated source
// uses; the atomics are sequential (the tests call them from one thread).
#include <math.h>
#include <string.h>
#define __device__
#define __forceinline__ inline
#define __global__
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
static inline float __uint_as_float(unsigned int x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int x; memcpy(&x, &f, 4); return x; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
template <class T> static inline T gp_host_cas(T* address, T compare, T value) {
    T old = *address;
    if (old == compare) *address = value;
    return old;
}
static inline unsigned int atomicCAS(unsigned int* a, unsigned int c, unsigned int v) {
    return gp_host_cas(a, c, v);
}
static inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c,
                                           unsigned long long v) {
    return gp_host_cas(a, c, v);
}
template <class T> static inline T atomicAdd(T* a, T x) { T old = *a; *a = (T)(old + x); return old; }
template <class T> static inline T atomicMin(T* a, T x) { T old = *a; if (x < old) *a = x; return old; }
template <class T> static inline T atomicMax(T* a, T x) { T old = *a; if (x > old) *a = x; return old; }
"""

_HOST_WRAPPERS = r"""
extern "C" {
void NS_gather(const void* values, const void* weights, const void* out_degree,
               const void* in_degree, const double* wid, const long long* vertex,
               const bool* is_source, const long long* us, const long long* vs,
               const long long* es, long long n, void* out) {
    using namespace NS;
    gp_attrs attrs = {(const degree_t*)out_degree, (const degree_t*)in_degree, wid, vertex,
                      is_source};
    for (long long i = 0; i < n; ++i)
        ((accum_t*)out)[i] = gp_gather((const value_t*)values, (const weight_t*)weights, attrs,
                                       us[i], vs[i], es[i]);
}
void NS_apply(const void* out_degree, const void* in_degree, const double* wid,
              const long long* vertex, const bool* is_source, const double* aggregates,
              long long k, const long long* num_vertices, const long long* iterations,
              const long long* vs, const void* values, const void* accums, long long n,
              void* out) {
    using namespace NS;
    gp_attrs attrs = {(const degree_t*)out_degree, (const degree_t*)in_degree, wid, vertex,
                      is_source};
    for (long long i = 0; i < n; ++i)
        ((value_t*)out)[i] = gp_apply(attrs, aggregates + i * k, num_vertices[i], iterations[i],
                                      vs[i], ((const value_t*)values)[i],
                                      ((const accum_t*)accums)[i]);
}
void NS_activate(const void* news, const void* olds, long long n, bool* out) {
    using namespace NS;
    for (long long i = 0; i < n; ++i)
        out[i] = gp_activate(((const value_t*)news)[i], ((const value_t*)olds)[i]);
}
void NS_init(const void* out_degree, const void* in_degree, const double* wid,
             const long long* vertex, const bool* is_source, const long long* num_vertices,
             const long long* vs, long long n, void* out) {
    using namespace NS;
    gp_attrs attrs = {(const degree_t*)out_degree, (const degree_t*)in_degree, wid, vertex,
                      is_source};
    for (long long i = 0; i < n; ++i)
        ((value_t*)out)[i] = gp_init(attrs, num_vertices[i], vs[i]);
}
void NS_combine(const void* a, const void* b, long long n, void* out) {
    using namespace NS;
    for (long long i = 0; i < n; ++i)
        ((accum_t*)out)[i] = gp_combine(((const accum_t*)a)[i], ((const accum_t*)b)[i]);
}
void NS_atomic_combine(void* slots, const void* xs, long long n) {
    using namespace NS;
    for (long long i = 0; i < n; ++i)
        gp_atomic_combine(&((accum_t*)slots)[i], ((const accum_t*)xs)[i]);
}
void NS_identity(void* out) { *(NS::accum_t*)out = NS::gp_accum_identity(); }
void NS_aggregate(const void* values, const void* out_degree, const void* in_degree,
                  const double* wid, const long long* vertex, const bool* is_source,
                  const long long* num_vertices, const long long* iterations,
                  const long long* vs, long long n, double* out, long long k) {
    using namespace NS;
    gp_attrs attrs = {(const degree_t*)out_degree, (const degree_t*)in_degree, wid, vertex,
                      is_source};
    for (long long i = 0; i < n; ++i)
        gp_aggregate((const value_t*)values, attrs, num_vertices[i], iterations[i], vs[i],
                     out + i * k);
}
void NS_aggregate_identity(double* out, long long k) {
    for (long long i = 0; i < k; ++i) out[i] = NS::gp_aggregate_identity((int)i);
}
}
"""


def _namespaced(case_index: int, case: Case) -> str:
    name = f"p{case_index}"
    return (f"#undef GP_NUM_AGGREGATES\nnamespace {name} {{\n{case.translated.source}}}\n"
            + _HOST_WRAPPERS.replace("NS", name))


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    """All programs compiled by g++ into one shared library (ctypes handle)."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed: the host compilation of the CUDA source is skipped")
    directory = tmp_path_factory.mktemp("cuda_host")
    source = _HOST_PRELUDE + "".join(_namespaced(i, c) for i, c in enumerate(CASES))
    (directory / "programs.cpp").write_text(source)
    library = directory / "programs.so"
    result = subprocess.run(
        [compiler, "-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math", "-fPIC",
         "-shared", "-Wall", "-Wno-unused-parameter", "-Wno-unused-variable",
         "-Wno-unused-function", "-Wno-unused-but-set-variable", "-Wno-tautological-compare",
         str(directory / "programs.cpp"), "-o", str(library)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-6000:]
    assert "warning" not in result.stderr, result.stderr[-6000:]
    return ctypes.CDLL(str(library))


_SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, 1e-310, 2.0 ** 53 + 2,
                   1e300, -1e300, math.inf, -math.inf, math.nan]


def _random_values(dtype, size, domain, rng) -> np.ndarray:
    """Random values of ``dtype`` with a share of special ones (zeros, extremes, NaN)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(size) < 0.5
    special = rng.random(size) < 0.3
    if dtype.kind == "f":
        if domain == "small":
            values = rng.integers(-8, 9, size) / 2.0
        else:
            values = rng.normal(size=size) * 10.0 ** rng.uniform(-3, 4, size)
            specials = [x for x in _SPECIAL_FLOATS if domain == "full" or
                        (math.isfinite(x) and abs(x) < 1e6)]
            values[special] = rng.choice(specials, int(special.sum()))
        with np.errstate(over="ignore"):
            return values.astype(dtype)
    info = np.iinfo(dtype)
    if domain == "small":
        low, high = max(info.min, -4), min(info.max, 5)
        return rng.integers(low, high + 1, size).astype(dtype)
    if domain == "finite":
        low, high = max(info.min, -2 ** 20), min(info.max, 2 ** 20)
        return rng.integers(low, high + 1, size, dtype=np.int64).astype(dtype)
    values = rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, size,
                          dtype=np.int64).astype(dtype)
    wide = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    mixed = rng.random(size) < 0.2
    values[mixed] = wide[mixed]
    specials = np.array([v for v in (0, 1, -1, 2, -2, 3, -3, 7, -7, info.min, info.max,
                                     info.min + 1, info.max - 1)
                         if info.min <= v <= info.max], dtype=dtype)
    values[special] = rng.choice(specials, int(special.sum()))
    return values


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


def _same(got: np.ndarray, expected: np.ndarray, ulps: int) -> np.ndarray:
    """Elementwise: equal bits, both NaN, or within ``ulps`` units in the last place."""
    if got.dtype.kind != "f":
        return got == expected
    both_nan = np.isnan(got) & np.isnan(expected)
    bits = np.dtype(f"i{got.dtype.itemsize}")
    same = got.view(bits) == expected.view(bits)
    if ulps:
        with np.errstate(invalid="ignore", over="ignore"):
            spacing = np.spacing(np.abs(expected).astype(got.dtype))
            same |= np.abs(got.astype(np.float64) - expected.astype(np.float64)) <= \
                ulps * np.abs(spacing.astype(np.float64))
    return same | both_nan


def _numba_each(function, arguments_of, count, dtype):
    """Call ``function`` per sample; NaN-free mask of the samples numba did not refuse."""
    results = np.zeros(count, dtype=dtype)
    ran = np.ones(count, dtype=bool)
    for i in range(count):
        try:
            result = function(*arguments_of(i))
        except (ZeroDivisionError, OverflowError):
            # Python raises; the GPU gives numba's numpy-error-model result (documented)
            ran[i] = False
            continue
        results[i] = np.array(result).astype(dtype)
    return results, ran


def _check(case: Case, role: str, got: np.ndarray, expected: np.ndarray, ran: np.ndarray,
           inputs: dict, *, rtol: float = 0.0):
    assert ran.mean() > 0.5, f"{case.id}: {role}: numba refused most samples"
    same = _same(got, expected, case.ulps) | ~ran
    if rtol and got.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            same |= np.isclose(got, expected, rtol=rtol, atol=0.0)
    if not same.all():
        bad = np.flatnonzero(~same)[:5]
        shown = "\n".join(f"  sample {i}: got {got[i]!r} numba {expected[i]!r} inputs "
                          + ", ".join(f"{k}={v[i]!r}" for k, v in inputs.items())
                          for i in bad)
        user = f"gp_user_{role}"
        translation = _function_text(case.translated.source, user) \
            if f" {user}(" in case.translated.source else ""
        pytest.fail(f"{case.id}: {role} differs on {int((~same).sum())} of {len(got)} samples"
                    f"\n{shown}\n{translation}")


def _inputs(case: Case) -> dict:
    """Seeded random inputs for every entry point of ``case``'s program."""
    translated = case.translated
    value_dtype, accum_dtype = translated.value_dtype, translated.accum_dtype
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    n, count, domain = NUM_VERTICES, SAMPLES, case.domain
    small_or_finite = "small" if domain == "small" else "finite"
    k = len(translated.aggregate_names)
    inputs = {
        "a": _random_values(accum_dtype, count, domain, rng),
        "b": _random_values(accum_dtype, count, domain, rng),
        "values": _random_values(value_dtype, n, domain, rng),
        "weights": _random_values(translated.weight_dtype, n, domain, rng),
        "out_degree": _random_values(translated.degree_dtype, n, small_or_finite, rng),
        "in_degree": _random_values(translated.degree_dtype, n, small_or_finite, rng),
        "weighted_in_degree": _random_values(np.float64, n, domain, rng),
        "vertex": _random_values(np.int64, n, domain, rng),
        "is_source": rng.random(n) < 0.3,
        "us": rng.integers(0, n, count), "vs": rng.integers(0, n, count),
        "es": rng.integers(0, n, count),
        "num_vertices": _random_values(np.int64, count, small_or_finite, rng),
        "iterations": rng.integers(0, 12, count),
        "aggregates": _random_values(np.float64, (count, max(k, 1)), domain, rng)[:, :k].copy(),
        "old": _random_values(value_dtype, count, domain, rng),
        "accum": _random_values(accum_dtype, count, domain, rng),
        "new": _random_values(value_dtype, count, domain, rng),
        "aggregate_start": _random_values(np.float64, (count, max(k, 1)), domain,
                                          rng)[:, :k].copy(),
    }
    inputs["new"][::4] = inputs["old"][::4]
    return inputs


def _attrs(inputs: dict) -> tuple:
    return tuple(inputs[name] for name in ("out_degree", "in_degree", "weighted_in_degree",
                                           "vertex", "is_source"))


def _expected(case: Case, cpu, inputs: dict) -> dict:
    """What the numba-compiled CpuProgram gives: role -> (results, samples it ran)."""
    translated = case.translated
    value_dtype, accum_dtype = translated.value_dtype, translated.accum_dtype
    count = SAMPLES
    expected = {"combine": _numba_each(cpu.combine, lambda i: (inputs["a"][i], inputs["b"][i]),
                                       count, accum_dtype)}
    if case.only_combine:
        return expected
    values, weights, attrs = inputs["values"], inputs["weights"], _attrs(inputs)
    us, vs, es = inputs["us"], inputs["vs"], inputs["es"]
    num_vertices, iterations = inputs["num_vertices"], inputs["iterations"]
    expected["gather"] = _numba_each(
        cpu.gather_call, lambda i: (values, weights, attrs, int(us[i]), int(vs[i]), int(es[i])),
        count, accum_dtype)
    expected["apply"] = _numba_each(
        cpu.apply_call, lambda i: (attrs, inputs["aggregates"][i], int(num_vertices[i]),
                                   int(iterations[i]), int(vs[i]), inputs["old"][i],
                                   inputs["accum"][i]),
        count, value_dtype)
    expected["activate"] = _numba_each(
        cpu.activate_call, lambda i: (inputs["new"][i], inputs["old"][i]), count, np.bool_)
    expected["init"] = _numba_each(
        cpu.init_call, lambda i: (attrs, int(num_vertices[i]), int(vs[i])), count, value_dtype)
    k = len(translated.aggregate_names)
    if k:
        aggregated = inputs["aggregate_start"].copy()
        ran = np.ones(count, dtype=bool)
        for i in range(count):
            # add aggregates go to exact accumulators: a start plus one term is its float sum
            sums = np.zeros((k, exact_sum.WIDTH), np.int64)
            try:
                cpu.aggregate_call(values, attrs, int(num_vertices[i]), int(iterations[i]),
                                   int(vs[i]), aggregated[i], sums)
            except (ZeroDivisionError, OverflowError):
                ran[i] = False
            for j, monoid in enumerate(cpu.aggregate_monoids):
                if monoid == "add":
                    aggregated[i, j] += exact_sum.value(sums[j])
        expected["aggregate"] = (aggregated, ran)
    return expected


def _shown_inputs(role: str, inputs: dict) -> dict:
    if role in ("combine", "atomic_combine"):
        return {"a": inputs["a"], "b": inputs["b"]}
    if role == "gather":
        return {"src": inputs["values"][inputs["us"]], "dst": inputs["values"][inputs["vs"]],
                "weight": inputs["weights"][inputs["es"]]}
    if role == "apply":
        return {"value": inputs["old"], "accum": inputs["accum"], "v": inputs["vs"],
                "iteration": inputs["iterations"]}
    if role == "activate":
        return {"new": inputs["new"], "old": inputs["old"]}
    return {"v": inputs["vs"], "num_vertices": inputs["num_vertices"]}


def _check_all(case: Case, results: dict, expected: dict, inputs: dict, *, rtol: float = 0.0,
               skip_roles=()):
    for role, got in results.items():
        if role in skip_roles:
            continue
        reference, ran = expected["combine" if role == "atomic_combine" else role]
        if role == "aggregate":
            for j, name in enumerate(case.translated.aggregate_names):
                _check(case, f"aggregate {name}", got[:, j].copy(), reference[:, j].copy(),
                       ran, {"v": inputs["vs"]}, rtol=rtol)
            continue
        _check(case, role, got, reference, ran, _shown_inputs(role, inputs), rtol=rtol)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_generated_code_computes_what_numba_computes(case, host_library):
    def entry(name):
        function = getattr(host_library, f"p{CASES.index(case)}_{name}")
        function.restype = None
        return function

    translated = case.translated
    value_dtype, accum_dtype = translated.value_dtype, translated.accum_dtype
    inputs = _inputs(case)
    expected = _expected(case, compile_program(case.program), inputs)
    count, k = SAMPLES, len(translated.aggregate_names)
    results = {}

    # the sum monoid: combine, its atomic, its identity
    a, b = inputs["a"], inputs["b"]
    results["combine"] = np.zeros(count, accum_dtype)
    entry("combine")(_pointer(a), _pointer(b), ctypes.c_longlong(count),
                     _pointer(results["combine"]))
    padded = -(-count * accum_dtype.itemsize // 4) * 4 // accum_dtype.itemsize
    slots = np.zeros(padded, accum_dtype)
    slots[:count] = a
    entry("atomic_combine")(_pointer(slots), _pointer(b), ctypes.c_longlong(count))
    results["atomic_combine"] = slots[:count]
    identity = np.zeros(1, accum_dtype)
    entry("identity")(_pointer(identity))
    assert _same(identity, np.array([translated.identity], accum_dtype), 0).all()
    if not case.only_combine:
        attr_pointers = [_pointer(x) for x in _attrs(inputs)]
        us, vs, es = (_pointer(inputs[name]) for name in ("us", "vs", "es"))
        num_vertices, iterations = _pointer(inputs["num_vertices"]), _pointer(inputs["iterations"])
        n = ctypes.c_longlong(count)
        results["gather"] = np.zeros(count, accum_dtype)
        entry("gather")(_pointer(inputs["values"]), _pointer(inputs["weights"]), *attr_pointers,
                        us, vs, es, n, _pointer(results["gather"]))
        results["apply"] = np.zeros(count, value_dtype)
        entry("apply")(*attr_pointers, _pointer(inputs["aggregates"]), ctypes.c_longlong(k),
                       num_vertices, iterations, vs, _pointer(inputs["old"]),
                       _pointer(inputs["accum"]), n, _pointer(results["apply"]))
        results["activate"] = np.zeros(count, np.bool_)
        entry("activate")(_pointer(inputs["new"]), _pointer(inputs["old"]), n,
                          _pointer(results["activate"]))
        results["init"] = np.zeros(count, value_dtype)
        entry("init")(*attr_pointers, num_vertices, vs, n, _pointer(results["init"]))
        identities = np.zeros(max(k, 1))
        entry("aggregate_identity")(_pointer(identities), ctypes.c_longlong(k))
        assert list(identities[:k]) == [float(monoid_identity(m, np.float64))
                                        for m in translated.aggregate_monoids]
        if k:
            results["aggregate"] = inputs["aggregate_start"].copy()
            entry("aggregate")(_pointer(inputs["values"]), *attr_pointers, num_vertices,
                               iterations, vs, n, _pointer(results["aggregate"]),
                               ctypes.c_longlong(k))
    _check_all(case, results, expected, inputs)


# ------------------------------------------------ 3. the device code compiles --
_DEVICE_KERNEL = r"""
__global__ void gp_check_kernel(const value_t* values, const weight_t* weights, gp_attrs attrs,
                                const double* aggregates, value_t* out_values,
                                bool* out_active, double* out_aggregates,
                                accum_t* global_accum) {
    __shared__ __align__(16) accum_t local[64];
    const long long v = threadIdx.x;
    local[threadIdx.x % 64] = gp_accum_identity();
    __syncthreads();
    const accum_t x = gp_gather(values, weights, attrs, v, v, v);
    gp_atomic_combine(&local[threadIdx.x % 64], x);
    gp_atomic_combine(&global_accum[threadIdx.x % 64], x);
    __syncthreads();
    const accum_t summed = gp_combine(local[threadIdx.x % 64], x);
    const value_t updated = gp_apply(attrs, aggregates, 100, 1, v, values[v], summed);
    out_values[v] = updated;
    out_active[v] = gp_activate(updated, values[v]);
    out_values[v + 64] = gp_init(attrs, 100, v);
    double partial[GP_NUM_AGGREGATES + 1];
    for (int i = 0; i < GP_NUM_AGGREGATES; ++i) partial[i] = gp_aggregate_identity(i);
    gp_aggregate(values, attrs, 100, 1, v, partial);
    out_aggregates[v] = partial[0];
}
"""


def _device_unit(case: Case) -> str:
    return case.translated.source + _DEVICE_KERNEL


def test_device_code_compiles_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the device compilation check is skipped")
    units = [f"#undef GP_NUM_AGGREGATES\nnamespace p{i} {{\n{_device_unit(c)}}}\n"
             for i, c in enumerate(CASES)]
    source = tmp_path / "programs.cu"
    source.write_text("".join(units))
    # 550: a variable set but never used, as the user's Python may do
    result = subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-diag-suppress", "550", "-c",
                             str(source), "-o", str(tmp_path / "programs.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-6000:]
    assert "warning" not in result.stderr.lower(), result.stderr[-6000:]


@pytest.mark.slow      # about 20 s on 2 cores: nvcc over every variant
def test_every_pull_kernel_variant_compiles_with_nvcc(tmp_path, monkeypatch):
    """The whole translation unit of the engine (kernels/gpu.py), with the pull
    kernel instantiated for every edges-per-thread choice and variant, for
    programs of 4- and 8-byte vertex ids and 1- to 8-byte accumulators, and
    with the replica merge's other lane-group sizes."""
    from garaphpy.kernels.gpu import EDGES_PER_THREAD_CHOICES, kernel_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the kernel compilation check is skipped")
    chosen = {"builtin-pagerank": np.int32, "builtin-sssp": np.int64, "builtin-hs": np.int32,
              "monoid-min-uint8": np.int32, "monoid-add-float32": np.int64}
    compilations = []

    def start_nvcc(name, text):
        """Compile ``text`` as ``name``.cu in the background (one unit each: the
        extern "C" kernels repeat)."""
        source = tmp_path / f"{name}.cu"
        source.write_text(text)
        compilations.append((name, subprocess.Popen(
            [nvcc, "-arch=sm_90", "-std=c++17", "-diag-suppress", "550", "-c", str(source),
             "-o", str(source.with_suffix(".o"))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))

    for case in (c for c in CASES if c.id in chosen):
        instances = "".join(
            f"void* gp_instance_{precomputed}_{edges} = "
            f"(void*)gp_pull<{precomputed}, {edges}>;\n"
            for precomputed in ("true", "false") for edges in EDGES_PER_THREAD_CHOICES)
        start_nvcc(case.id, kernel_source(case.translated, chosen[case.id]) + "\n" + instances)
    pagerank = next(c for c in CASES if c.id == "builtin-pagerank")
    for lanes in (1, 2, 32):  # the replica merge's lane groups (8 above, the default)
        monkeypatch.setattr(config, "GPU_MERGE_LANES", lanes)
        start_nvcc(f"merge-lanes-{lanes}", kernel_source(pagerank.translated, np.int32)
                   + "\nvoid* gp_instance = (void*)gp_pull<true, 8>;\n")
    assert len(compilations) == len(chosen) + 3
    for case_id, process in compilations:
        _, stderr = process.communicate()
        assert process.returncode == 0, (case_id, stderr[-6000:])
        assert "warning" not in stderr.lower(), (case_id, stderr[-6000:])


@pytest.mark.parametrize("lanes", [0, 3, 64, True, 8.0])
def test_merge_lanes_other_than_a_power_of_two_up_to_32_are_refused(monkeypatch, lanes):
    from garaphpy.kernels.gpu import kernel_source

    monkeypatch.setattr(config, "GPU_MERGE_LANES", lanes)
    case = next(c for c in CASES if c.id == "builtin-pagerank")
    with pytest.raises(ConfigError, match="GPU_MERGE_LANES"):
        kernel_source(case.translated, np.int32)


def test_device_code_compiles_with_cupy_nvrtc():
    cupy = pytest.importorskip("cupy", reason="cupy is not installed: the NVRTC check is skipped")
    for case in CASES:
        module = cupy.RawModule(code=_device_unit(case), options=("-std=c++17",),
                                name_expressions=("gp_check_kernel",))
        module.compile()


_GPU_KERNELS = r"""
extern "C" __global__ void NS_evaluate(
        const value_t* values, const weight_t* weights, const degree_t* out_degree,
        const degree_t* in_degree, const double* weighted_in_degree, const long long* vertex,
        const bool* is_source, const long long* us, const long long* vs, const long long* es,
        const double* aggregates, long long k, const long long* num_vertices,
        const long long* iterations, const value_t* olds, const accum_t* accums,
        const value_t* news, const accum_t* as, const accum_t* bs, long long n,
        accum_t* gather_out, value_t* apply_out, bool* activate_out, value_t* init_out,
        accum_t* combine_out, double* aggregate_out) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    gp_attrs attrs;
    attrs.out_degree = out_degree;
    attrs.in_degree = in_degree;
    attrs.weighted_in_degree = weighted_in_degree;
    attrs.vertex = vertex;
    attrs.is_source = is_source;
    gather_out[i] = gp_gather(values, weights, attrs, us[i], vs[i], es[i]);
    apply_out[i] = gp_apply(attrs, aggregates + i * k, num_vertices[i], iterations[i], vs[i],
                            olds[i], accums[i]);
    activate_out[i] = gp_activate(news[i], olds[i]);
    init_out[i] = gp_init(attrs, num_vertices[i], vs[i]);
    combine_out[i] = gp_combine(as[i], bs[i]);
    gp_aggregate(values, attrs, num_vertices[i], iterations[i], vs[i], aggregate_out + i * k);
}

// every block combines all of xs into `slots` accumulators, in shared and in global memory
extern "C" __global__ void NS_contend(const accum_t* xs, int n, int slots, int padded_slots,
                                      accum_t* global_slots, accum_t* shared_result) {
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    accum_t* local = reinterpret_cast<accum_t*>(shared_bytes);
    for (int s = threadIdx.x; s < padded_slots; s += blockDim.x) local[s] = gp_accum_identity();
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        gp_atomic_combine(&local[i % slots], xs[i]);
        gp_atomic_combine(&global_slots[i % slots], xs[i]);
    }
    __syncthreads();
    if (blockIdx.x == 0)
        for (int s = threadIdx.x; s < slots; s += blockDim.x) shared_result[s] = local[s];
}
"""

CONTENTION_BLOCKS, CONTENTION_THREADS, CONTENTION_SLOTS, CONTENTION_TERMS = 4, 256, 7, 4096


def _float_to_integer_roles(case: Case) -> set:
    """Roles whose user function returns a float that the entry point casts to an integer.

    Out of range that cast is undefined (numba's fptosi): the CPU and the GPU
    differ there by design, so these are left to the host comparison.
    """
    translated, roles = case.translated, set()
    for role, dtype in (("gather", translated.accum_dtype), ("apply", translated.value_dtype),
                        ("init", translated.value_dtype)):
        match = re.search(rf"__forceinline__ (\w+) gp_user_{role}\(", translated.source)
        if match and match.group(1) in ("float", "double") and dtype.kind in "iu":
            roles.add(role)
    return roles


def _fold(cpu, identity, terms, dtype):
    accumulated = identity
    for x in terms:
        accumulated = np.array(cpu.combine(accumulated, x)).astype(dtype)[()]
    return accumulated


@pytest.mark.gpu
def test_device_functions_compute_on_the_gpu_what_numba_computes():
    cupy = pytest.importorskip("cupy")
    units = "".join(f"#undef GP_NUM_AGGREGATES\nnamespace p{i} {{\n{c.translated.source}"
                    f"{_GPU_KERNELS.replace('NS', f'p{i}')}}}\n" for i, c in enumerate(CASES))
    module = cupy.RawModule(code=units, options=("-std=c++17",))
    failures = []
    for index, case in enumerate(CASES):
        translated = case.translated
        value_dtype, accum_dtype = translated.value_dtype, translated.accum_dtype
        cpu = compile_program(case.program)
        inputs = _inputs(case)
        expected = _expected(case, cpu, inputs)
        count, k = SAMPLES, len(translated.aggregate_names)
        device = {name: cupy.asarray(array) for name, array in inputs.items()}
        outputs = {"gather": cupy.zeros(count, accum_dtype), "apply": cupy.zeros(count, value_dtype),
                   "activate": cupy.zeros(count, np.bool_), "init": cupy.zeros(count, value_dtype),
                   "combine": cupy.zeros(count, accum_dtype),
                   "aggregate": device["aggregate_start"].copy()}
        module.get_function(f"p{index}_evaluate")(
            ((count + 127) // 128,), (128,),
            (device["values"], device["weights"], device["out_degree"], device["in_degree"],
             device["weighted_in_degree"], device["vertex"], device["is_source"], device["us"],
             device["vs"], device["es"], device["aggregates"], np.int64(k),
             device["num_vertices"], device["iterations"], device["old"], device["accum"],
             device["new"], device["a"], device["b"], np.int64(count), outputs["gather"],
             outputs["apply"], outputs["activate"], outputs["init"], outputs["combine"],
             outputs["aggregate"]))
        results = {"combine": outputs["combine"].get()}
        if not case.only_combine:
            results.update({role: outputs[role].get() for role in ("gather", "apply",
                                                                    "activate", "init")})
            if k:
                results["aggregate"] = outputs["aggregate"].get()
        try:
            _check_all(case, results, expected, inputs, rtol=1e-6 if case.ulps else 0.0,
                       skip_roles=_float_to_integer_roles(case))
        except pytest.fail.Exception as failure:
            failures.append(str(failure))

        # the atomics under contention: 4 blocks x 256 threads on 7 slots
        rng = np.random.default_rng(zlib.crc32(case.id.encode()) + 1)
        terms = _random_values(accum_dtype, CONTENTION_TERMS, "small", rng)  # exact sums
        identity = np.array([translated.identity], accum_dtype)[0]
        padded = -(-CONTENTION_SLOTS * accum_dtype.itemsize // 4) * 4 // accum_dtype.itemsize
        global_slots = cupy.full(padded, identity, accum_dtype)
        shared_result = cupy.zeros(CONTENTION_SLOTS, accum_dtype)
        module.get_function(f"p{index}_contend")(
            (CONTENTION_BLOCKS,), (CONTENTION_THREADS,),
            (cupy.asarray(terms), np.int32(CONTENTION_TERMS), np.int32(CONTENTION_SLOTS),
             np.int32(padded), global_slots, shared_result),
            shared_mem=padded * accum_dtype.itemsize)
        for slot in range(CONTENTION_SLOTS):
            mine = terms[slot::CONTENTION_SLOTS]
            block = _fold(cpu, identity, mine, accum_dtype)
            everyone = _fold(cpu, identity, np.tile(mine, CONTENTION_BLOCKS), accum_dtype)
            got_shared, got_global = shared_result[slot].get()[()], global_slots[slot].get()[()]
            if got_shared != block or got_global != everyone:
                failures.append(f"{case.id}: atomics on slot {slot}: shared {got_shared!r} "
                                f"(numba {block!r}), global {got_global!r} (numba {everyone!r})")
        assert (global_slots[CONTENTION_SLOTS:].get() == identity).all(), \
            f"{case.id}: an atomic wrote past its slot"
    assert not failures, "\n\n".join(failures)


# ---------------------------------------------------------------- 4. refusals --
def _define(name, **functions):
    """Define a program class from functions (raises what the class definition raises)."""
    namespace = {"value_dtype": np.float64, "sum": "add", "gather": identity_gather,
                 "apply": keep_accum, "activate": changed, "init": vertex_init}
    namespace.update(functions)
    return type(name, (VertexProgram,), namespace)


def _refused_at(function, marker: str) -> str:
    """A regex for the error of ``function``'s line holding ``marker``."""
    lines, first = inspect.getsourcelines(function)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return rf"test_cuda_translate\.py:{first + offset}: in {function.__name__}: .*"


def partially_assigned(value, accum):
    if accum > 0:
        y = accum
    return value + y  # refused: partial


def float_of_bool(value, is_source):
    return value + float(is_source)  # refused: float(bool)


def log_with_base(value, accum):
    return math.log(accum, 2)  # refused: two-argument log


def min_of_one(value, accum):
    return min(accum)  # refused: iterable min


def falls_through(value, accum):
    if accum > 0:
        return accum
    value = 1.0  # refused: no return


def too_large(value, accum):
    return accum + 1180591620717411303424  # refused: 2 ** 70


def complex_power(value, accum):
    return accum + (-1) ** 0.5  # refused: complex


def shadows_min(value, accum):
    min = accum  # refused: shadowing
    return min


def read_before_assignment(value, accum):
    y = value + x  # refused: before assignment
    x = 1.0
    return y


@pytest.mark.parametrize("function, marker, message", [
    (partially_assigned, "refused: partial", "assigned on only some of the paths"),
    (float_of_bool, "refused: float(bool)", r"numba cannot type float\(\) on \(bool\)"),
    (log_with_base, "refused: two-argument log", r"numba cannot type math.log\(\)"),
    (min_of_one, "refused: iterable min", "two or more arguments"),
    (falls_through, "refused: no return", "not every path returns a value"),
    (too_large, "refused: 2 ** 70", "does not fit in 64 bits"),
    (complex_power, "refused: complex", "not a bool, int or float"),
    (shadows_min, "refused: shadowing", "hides the function"),
    # refused by the subset checker already, before the translator
    (read_before_assignment, "refused: before assignment", "unknown name 'x'"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_untranslatable_constructs_are_refused_at_class_definition(function, marker, message):
    with pytest.raises(ProgramError, match=_refused_at(function, marker) + message):
        _define("Refused", apply=function)


def test_a_value_type_without_a_cuda_scalar_is_refused_at_class_definition():
    with pytest.raises(ProgramError, match="value type: dtype float16 has no CUDA C"):
        type("HalfPrecision", (VertexProgram,), {
            "value_dtype": np.float16, "gather": identity_gather, "apply": keep_accum,
            "activate": changed, "init": vertex_init})


def test_check_translatable_accepts_every_builtin_program():
    for cls in BUILTIN_PROGRAMS.values():
        check_translatable(cls)


def test_translation_follows_the_dtypes_of_the_run():
    # the class check used float64 weights; a run's int32 weights change the gather's types
    case = next(c for c in CASES if c.id == "builtin-sssp")
    assert "typedef double weight_t;" in case.translated.source
    int_weights = translate_program(SSSP(), weight_dtype=np.int32)
    gather = _function_text(int_weights.source, "gp_user_gather")
    assert "double gp_user_gather(double src, int weight)" in gather
    assert "return src + (double)weight;" in gather
