"""The dtype names a rule may be keyed by, and the per-dtype table of ``"metric": "default"``."""

from __future__ import annotations

from collections.abc import Mapping

# ``"metric": "default"``: (rtol, atol) by dtype, torch.testing.assert_close's table
# (https://pytorch.org/docs/stable/testing.html): float16/complex32 1e-3/1e-5, bfloat16
# 1.6e-2/1e-5, float32/complex64 1.3e-6/1e-5, float64/complex128 1e-7/1e-7. torch has no row
# for ml_dtypes' 8-, 6- and 4-bit floats (its "other" row is exact); here each takes one
# machine epsilon of its format relative (2**-mantissa bits: a single rounding) and atol 0. Any
# other dtype (integers, bool, strings) is compared exactly, as torch's "other" row (0, 0).
DEFAULT_TABLE: Mapping[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
    "float8_e4m3fn": (2**-3, 0.0),
    "float8_e4m3fnuz": (2**-3, 0.0),
    "float8_e4m3b11fnuz": (2**-3, 0.0),
    "float8_e4m3": (2**-3, 0.0),
    "float8_e5m2": (2**-2, 0.0),
    "float8_e5m2fnuz": (2**-2, 0.0),
    "float8_e3m4": (2**-4, 0.0),
    "float8_e8m0fnu": (1.0, 0.0),
    "float6_e2m3fn": (2**-3, 0.0),
    "float6_e3m2fn": (2**-2, 0.0),
    "float4_e2m1fn": (2**-1, 0.0),
}
# The dtype names a ``per_dtype`` key may take: numpy's and ml_dtypes' names.
DTYPES = frozenset(
    {
        *DEFAULT_TABLE,
        "bool",
        *(f"{sign}int{bits}" for sign in ("", "u") for bits in (2, 4, 8, 16, 32, 64)),
        "longdouble",
        "float128",
        "clongdouble",
        "complex256",
    }
)
