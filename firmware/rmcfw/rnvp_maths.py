# The predictor's small numeric tools: the normal distribution, a 4x4 inverse, a quadratic
# form. Plain functions, so that every module of the predictor computes them the same way.
from math import exp, sqrt

from rmcfw.rnvp_slices import over, run

try:
    from math import erf
except ImportError:  # a port built without the special functions

    def erf(x):
        # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
        y = x if x >= 0 else -x
        t = 1.0 / (1.0 + 0.3275911 * y)
        p = t * (
            0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        y = 1.0 - p * exp(-y * y)
        return y if x >= 0 else -y


def cdf(x):
    """The standard normal distribution function."""
    return 0.5 * (1.0 + erf(x * 0.7071067811865476))


def sd(var):
    """sqrt of a variance that rounding (single floats) may have taken below 0."""
    return sqrt(var) if var > 1e-12 else 1e-6


def within(off, error):
    """Probability that a lead off from the one asked (s), of standard error `error`, is
    within +-0.5 s."""
    if error <= 0:
        return 1.0 if -0.5 <= off <= 0.5 else 0.0
    return cdf((off + 0.5) / error) - cdf((off - 0.5) / error)


def quad(x, y, z, xx, xy, yy, xz, yz, zz):
    """g' C g for g = (x, y, z) and the symmetric C given by its upper triangle."""
    return x * x * xx + y * y * yy + z * z * zz + 2 * (x * y * xy + x * z * xz + y * z * yz)


def invert4(m):
    """invert4_steps() run to its end."""
    return run(invert4_steps(m))


def invert4_steps(m):
    """Invert the symmetric 4x4 matrix m (a flat list, upper triangle filled) in place, by
    Gauss-Jordan without pivoting (a normal matrix: positive definite). False if singular.
    Resumable (rmcfw.rnvp_slices): a checkpoint first, and after each row of each pivot."""
    for i in range(4):
        for j in range(i):
            m[4 * i + j] = m[4 * j + i]
    if over():
        yield  # (the end of a fit's last row comes before it)
    for p in range(4):
        d = m[5 * p]
        if d <= 1e-30:
            return False
        d = 1.0 / d
        for j in range(4):
            m[4 * p + j] *= d
        m[5 * p] = d
        for i in range(4):
            if i != p:
                f = m[4 * i + p]
                if f != 0.0:
                    for j in range(4):
                        if j != p:
                            m[4 * i + j] -= f * m[4 * p + j]
                    m[4 * i + p] = -f * d
                if over():
                    yield  # (a pivot takes ~0.3 ms on the chip: a checkpoint a row)
    return True
