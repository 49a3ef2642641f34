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
  TANH_P/Q: tanh(a) = a P(a^2) / Q(a^2),   0 <= a <= 9.1, P of degree 5, Q of degree 4
  ERF_P:    erf(x) = x P(x^2),              0 <= x <= 0.85,  P of degree 5
  ERFC_LN:  erfc(a) = exp(L(a - 2.5)),      0.83 <= a <= 3.95, L of degree 6
            (weighted for the absolute error of erfc, which is what erf needs;
            ERFC_LN5 is the same of degree 5, for the SIMD kernels)
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


def rational_tanh(npn, nq, x_max, iters=3000, every=10):
    """tanh(a) ~ a P(a^2) / Q(a^2) on [0, x_max] with P(0) = Q(0) = 1, minimax for
    relative error: Lawson's reweighting of the linearised residual a P - tanh(a) Q,
    divided by tanh(a) Q of the previous Q (refreshed every `every` steps). Fitted in
    w = a^2 / x_max^2 for conditioning, then scaled back; returns (P, Q, error) of the
    best step, in f64."""
    a = cheb(1e-3, x_max, 40001)
    big = x_max * x_max
    w, t = a * a / big, np.tanh(a)
    q_prev, wt = np.ones_like(a), np.full(len(a), 1.0 / len(a))
    best = (math.inf, None, None)
    for it in range(iters):
        m = np.hstack([a[:, None] * w[:, None] ** np.arange(1, npn), -(t[:, None] * w[:, None] ** np.arange(1, nq))])
        s = 1.0 / (t * q_prev)
        ms, bs = m * s[:, None], (t - a) * s
        sw = np.sqrt(wt)
        c, *_ = np.linalg.lstsq(ms * sw[:, None], bs * sw, rcond=None)
        p, q = np.concatenate([[1.0], c[: npn - 1]]), np.concatenate([[1.0], c[npn - 1 :]])
        qv = np.polyval(q[::-1], w)
        err = float(np.max(np.abs(a * np.polyval(p[::-1], w) / qv - t) / t))
        if err < best[0] and np.all(qv > 0):
            best = (err, p / big ** np.arange(npn), q / big ** np.arange(nq))
        if it % every == every - 1:
            q_prev = qv
        wt = wt * np.abs(ms @ c - bs) ** 0.5
        wt /= wt.sum()
    return best[1], best[2], best[0]


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

    # math::tanh with fused multiply-adds (the coefficients are rounded to f32 as
    # they are; the sweeps in unary_tests.rs measure the result).
    p, q, _ = rational_tanh(6, 5, 9.1)
    p, q = p.astype(np.float32).astype(np.float64), q.astype(np.float32).astype(np.float64)
    a = cheb(1e-3, 9.1, 40001)
    e = float(np.max(np.abs(a * np.polyval(p[::-1], a * a) / np.polyval(q[::-1], a * a) / np.tanh(a) - 1.0)))
    show("TANH_P", p, e, "relative (of the ratio)")
    show("TANH_Q", q, e, "relative (of the ratio)")

    x = cheb(1e-6, 0.85)
    erf = np.vectorize(math.erf)
    c, e = fit_f32(x[:, None] * np.vander(x * x, 6, increasing=True), erf(x), erf(x))
    show("ERF_P", c, e, "relative")

    a = cheb(0.83, 3.95)
    erfc = np.vectorize(math.erfc)
    c, e = fit_f32(np.vander(a - 2.5, 7, increasing=True), np.log(erfc(a)), 1.0 / erfc(a))
    show("ERFC_LN", c, e, "absolute (of erfc)")
    c, e = fit_f32(np.vander(a - 2.5, 6, increasing=True), np.log(erfc(a)), 1.0 / erfc(a))
    show("ERFC_LN5", c, e, "absolute (of erfc)")

    a = np.concatenate([np.linspace(0.0, 1.0, 2001), 1.0 / np.linspace(1.0, 1.0 / 10.5, 8001)])
    g = np.vectorize(lambda v: math.erfc(v) * math.exp(v * v))(a)
    c, e = fit_f32(np.vander(2.0 / (2.0 + a), 10, increasing=True), g, g)
    show("ERFC_Q", c, e, "relative")


if __name__ == "__main__":
    main()
