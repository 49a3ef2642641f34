"""Derives the erf / erfc polynomial coefficients used in src/math.rs.

Run with any Python that has numpy:  python kernels/tools/fit_erf.py

Both fits minimise the maximum *relative* error with Lawson's iteratively
reweighted least squares (a simple way to approach the minimax polynomial).

  small: erf(x) = x * P(x^2)               for 0 <= x < 1,  P of degree 6 in x^2
  tail:  erfc(x) = exp(-x^2) * Q(t),       for 0.5 <= x <= 10.5, t = 2 / (2 + x), Q of degree 9

The printed values are the shortest decimal strings that round-trip through f32.
"""
import math

import numpy as np


def lawson(xs, f, var, deg, iters=400):
    fx = f(xs)
    v = np.vander(var(xs), deg + 1, increasing=True)
    w = np.full(len(xs), 1.0 / len(xs))
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(v * (sw / fx)[:, None], sw, rcond=None)
        err = np.abs(v @ c / fx - 1.0)
        w = w * err
        w /= w.sum()
    return c, float(np.max(np.abs(v @ c / fx - 1.0)))


def main():
    xs = np.cos(np.linspace(0.0, math.pi, 8001)) * 0.5 + 0.5
    xs = xs[xs > 1e-6]
    p, ep = lawson(xs, np.vectorize(lambda x: math.erf(x) / x), lambda x: x * x, 6)
    xs = 1.0 / np.linspace(1.0 / 10.5, 2.0, 12001)
    g = np.vectorize(lambda x: math.erfc(x) * math.exp(x * x))
    q, eq = lawson(xs, g, lambda x: 2.0 / (2.0 + x), 9)
    print(f"// erf small: max rel error of the f64 fit {ep:.3e}")
    print("const ERF_P: [f32; 7] = [" + ", ".join(str(np.float32(c)) for c in p) + "];")
    print(f"// erfc tail: max rel error of the f64 fit {eq:.3e}")
    print("const ERFC_Q: [f32; 10] = [" + ", ".join(str(np.float32(c)) for c in q) + "];")


if __name__ == "__main__":
    main()
