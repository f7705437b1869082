"""Random data any PE can recompute for any PE, and serial references."""
import numpy as np

import symm

SEED = 20240607


def rng(*tags):
    return np.random.default_rng([SEED] + [int(t) for t in tags])


def data(shape, dtype, *tags):
    """Random values of dtype for (tags): small integers where sums and products must stay
    exact or wrap alike; never all zeros."""
    r = rng(*tags)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = r.uniform(-4, 4, size=shape).astype(dt)
    elif dt.kind == "u":
        v = r.integers(1, min(np.iinfo(dt).max, 1 << 30), size=shape, dtype=dt)
    else:
        hi = min(np.iinfo(dt).max, 1 << 30)
        v = r.integers(-hi, hi, size=shape, dtype=dt)
    return v


def fold(values, op):
    """Members folded in team order, ((m0 op m1) op m2) ..., rounded to the type at every
    step, as symm reduces."""
    f = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
    acc = values[0].copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for v in values[1:]:
            acc = f(acc, v).astype(values[0].dtype)
    return acc


def me():
    return symm.my_pe()


def n():
    return symm.n_pes()
