"""Derives the polynomial coefficients of src/math/ (exp, expm1, erf, erfc).

Run with any Python that has numpy:  python kernels/tools/fit_poly.py

Each fit minimises the maximum weighted error with Lawson's iteratively
reweighted least squares (a simple way to approach the minimax polynomial).
The coefficients are then rounded to f32 one at a time, lowest degree first,
refitting the remaining ones after each rounding so that they absorb its
error. Printed values are the shortest decimal strings that round-trip
through f32.

  EXP_Q:    e^r = 1 + r Q(r),               |r| <= ln(2)/2,  Q of degree 5
  EXP5_Q:   the same with Q of degree 4
  EXPM1_Q:  e^r - 1 = r + r^2 Q(r),         |r| <= ln(2)/2,  Q of degree 4
  TEXP_Q:   e^r = 1 + r Q(r),               |r| <= ln(2)/16, Q of degree 2 (math/texp.rs Q)
  ERF_P:    erf(x) = x P(x^2),              0 <= x <= 0.85,  P of degree 5
  ERFC_LN:  erfc(a) = exp(L(a - 2.5)),      0.83 <= a <= 3.95, L of degree 6
            (weighted for the absolute error of erfc, which is what erf needs)
  ERFC_Q:   erfc(a) = exp(-a^2) Q(2/(2+a)), 0 <= a <= 10.5,  Q of degree 9
"""
import math

import numpy as np


def lawson(basis, target, scale, iters=300):
    """Coefficients c minimising max |(basis @ c - target) / scale|, and that max."""
    a, b = basis / scale[:, None], target / scale
    w = np.full(len(b), 1.0 / len(b))
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    return c, float(np.max(np.abs(a @ c - b)))


def fit_f32(basis, target, scale):
    """`lawson`, rounding the coefficients to f32 one at a time."""
    fixed = []
    n = basis.shape[1]
    for k in range(n):
        rest = target - basis[:, :k] @ np.array(fixed, dtype=np.float64) if fixed else target
        c, _ = lawson(basis[:, k:], rest, scale)
        fixed.append(float(np.float32(c[0])))
    c = np.array(fixed)
    return c, float(np.max(np.abs((basis @ c - target) / scale)))


def show(name, c, err, what):
    print(f"// {name}: max {what} error {err:.3e} with the f32 coefficients")
    print(f"const {name}: [f32; {len(c)}] = [" + ", ".join(str(np.float32(v)) for v in c) + "];")


def cheb(lo, hi, n=6001):
    return lo + (np.cos(np.linspace(0.0, math.pi, n)) * 0.5 + 0.5) * (hi - lo)


def main():
    h = math.log(2.0) / 2.0 + 2e-5
    r = cheb(-h, h)
    r = r[np.abs(r) > 1e-9]
    c, e = fit_f32(r[:, None] * np.vander(r, 6, increasing=True), np.expm1(r), np.exp(r))
    show("EXP_Q", c, e, "relative")
    c, e = fit_f32(r[:, None] * np.vander(r, 5, increasing=True), np.expm1(r), np.exp(r))
    show("EXP5_Q", c, e, "relative")
    c, e = fit_f32((r * r)[:, None] * np.vander(r, 5, increasing=True), np.expm1(r) - r, np.abs(np.expm1(r)))
    show("EXPM1_Q", c, e, "relative")

    # math/texp.rs: the reduced argument of the 8-entry table, |r| <= ln(2)/16.
    h8 = math.log(2.0) / 16.0 + 2e-6
    r8 = cheb(-h8, h8)
    r8 = r8[np.abs(r8) > 1e-12]
    c, e = fit_f32(r8[:, None] * np.vander(r8, 3, increasing=True), np.expm1(r8), np.exp(r8))
    show("TEXP_Q", c, e, "relative")

    x = cheb(1e-6, 0.85)
    erf = np.vectorize(math.erf)
    c, e = fit_f32(x[:, None] * np.vander(x * x, 6, increasing=True), erf(x), erf(x))
    show("ERF_P", c, e, "relative")

    a = cheb(0.83, 3.95)
    erfc = np.vectorize(math.erfc)
    c, e = fit_f32(np.vander(a - 2.5, 7, increasing=True), np.log(erfc(a)), 1.0 / erfc(a))
    show("ERFC_LN", c, e, "absolute (of erfc)")

    a = np.concatenate([np.linspace(0.0, 1.0, 2001), 1.0 / np.linspace(1.0, 1.0 / 10.5, 8001)])
    g = np.vectorize(lambda v: math.erfc(v) * math.exp(v * v))(a)
    c, e = fit_f32(np.vander(2.0 / (2.0 + a), 10, increasing=True), g, g)
    show("ERFC_Q", c, e, "relative")


if __name__ == "__main__":
    main()
