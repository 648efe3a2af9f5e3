// garaphpy's device helper library: Python's semantics, as numba lowers them,
// in CUDA C++ (Garaph section 2.3: one program, the same results on the CPU of
// section 4 and in the GPU pull kernel of sections 3.1-3.2).
//
// Not a translation unit: garaphpy/kernels/cuda_program/helpers.py cuts this
// file into sections, each starting at a line "//@ NAME: what it is", fills a
// section's ${field}s (string.Template) and emits, once each, the helpers a
// translated program calls, ahead of its functions. Every line of a section
// after its marker is emitted as it stands; trailing blank lines are dropped.

//@ signed_wrap: int64 + - * wrapping (on unsigned, where C++ defines it); fields name, op
__device__ __forceinline__ long long gp_py_${name}(long long a, long long b) {
    return (long long)((unsigned long long)a ${op} (unsigned long long)b);
}

//@ float_multiply: a product never fused into a multiply-add; fields t, intrinsic
__device__ __forceinline__ ${t} gp_py_mul(${t} a, ${t} b) {
    return ${intrinsic}(a, b);
}

//@ negate: 64-bit signed negation, wrapping
__device__ __forceinline__ long long gp_py_neg(long long a) {
    return (long long)(0ULL - (unsigned long long)a);
}

//@ absolute: integer abs, wrapping at the most negative value
template <class T>
__device__ __forceinline__ T gp_py_abs(T a) {
    return a < 0 ? (T)(0ULL - (unsigned long long)a) : a;
}

//@ minmax: min/max keeping Python's choice among equal or NaN arguments; fields name, op
template <class T>
__device__ __forceinline__ T gp_py_${name}(T a, T b) {
    return b ${op} a ? b : a;
}

//@ infinity: +inf without a header that defines INFINITY
__device__ __forceinline__ double gp_py_inf() {
    return __longlong_as_double(0x7ff0000000000000LL);
}

//@ signed_divmod: Python's floor // and % on int64 (0 on division by zero)
__device__ __forceinline__ long long gp_py_floordiv(long long x, long long y) {
    if (y == 0 || (x == (-9223372036854775807LL - 1) && y == -1)) return 0;
    const long long quotient = x / y, remainder = x % y;
    return remainder != 0 && (y ^ remainder) < 0 ? quotient - 1 : quotient;
}
__device__ __forceinline__ long long gp_py_mod(long long x, long long y) {
    if (y == 0 || (x == (-9223372036854775807LL - 1) && y == -1)) return 0;
    const long long remainder = x % y;
    return remainder != 0 && (y ^ remainder) < 0 ? remainder + y : remainder;
}

//@ unsigned_divmod: // and % on uint64 (0 on division by zero)
__device__ __forceinline__ unsigned long long gp_py_floordiv(unsigned long long x,
                                                             unsigned long long y) {
    return y == 0 ? 0 : x / y;
}
__device__ __forceinline__ unsigned long long gp_py_mod(unsigned long long x,
                                                        unsigned long long y) {
    return y == 0 ? 0 : x % y;
}

//@ float_divmod: Python's float // and %; fields t, fmod, floor, zero, half
// CPython's float_divmod, as numba compiles it; y == 0 gives numba's numpy-error-model result
__device__ __forceinline__ ${t} gp_py_divmod(${t} x, ${t} y, ${t}* remainder) {
    if (y == 0) {
        *remainder = ${fmod}(x, y);
        return x / y;
    }
    ${t} mod = ${fmod}(x, y);
    ${t} div = (x - mod) / y;
    if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1;
        }
    } else {
        mod = y < 0 ? -${zero} : ${zero};
    }
    ${t} floordiv;
    if (div < 0 || div > 0) {
        floordiv = ${floor}(div);
        if (div - floordiv > ${half}) floordiv += 1;
    } else {
        div = div * div;
        floordiv = div * x / y;
    }
    *remainder = mod;
    return floordiv;
}
__device__ __forceinline__ ${t} gp_py_floordiv(${t} x, ${t} y) {
    ${t} remainder;
    return gp_py_divmod(x, y, &remainder);
}
__device__ __forceinline__ ${t} gp_py_mod(${t} x, ${t} y) {
    ${t} remainder;
    gp_py_divmod(x, y, &remainder);
    return remainder;
}

//@ power_loop: exponentiation by squaring
// base ** exponent by squaring, numba's int_power loop
template <class T>
__device__ __forceinline__ T gp_py_pow_loop(T base, unsigned long long exponent) {
    T result = 1;
    while (exponent != 0) {
        if (exponent & 1) result *= base;
        exponent >>= 1;
        base *= base;
    }
    return result;
}

//@ integer_power: integer ** integer; fields t, e, negative
// numba's int_power for an integer result; 0 ** negative as numba's numpy error model
__device__ __forceinline__ ${t} gp_py_pow(${t} base, ${e} exponent) {
${negative}    if (exponent > 0x10000) return (${t})pow((double)base, (double)exponent);
    return (${t})gp_py_pow_loop((unsigned long long)base, (unsigned long long)exponent);
}

//@ negative_exponent: the part of integer_power for a signed exponent
    if (exponent < 0) {
        if (base == 0) return -9223372036854775807LL - 1;
        if (base != 1 && base != -1) return 0;
        return (exponent & 1) ? base : 1;
    }

//@ float_power: float ** integer; fields t, e, magnitude, result
// numba's int_power for a floating-point base and an integer exponent
__device__ __forceinline__ ${t} gp_py_pow(${t} base, ${e} exponent) {
${magnitude}    if (magnitude > 0x10000) return (${t})pow((double)base, (double)exponent);
    const ${t} result = gp_py_pow_loop(base, magnitude);
    return ${result};
}

//@ signed_magnitude: float_power's exponent magnitude, signed exponent
    const bool invert = exponent < 0;
    const unsigned long long magnitude =
        invert ? 0ULL - (unsigned long long)exponent : (unsigned long long)exponent;

//@ unsigned_magnitude: float_power's exponent magnitude, unsigned exponent
    const unsigned long long magnitude = exponent;
