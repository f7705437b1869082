"""pytest of the Python package, run by every PE of one job (symmrun -n N, or each PE
started torchrun-style by envrun.py): every PE runs the same tests in the same order, so
their collectives meet. symm starts once per session."""
import pytest

import symm


@pytest.fixture(scope="session", autouse=True)
def world():
    # The suite checks against NumPy whether torch is there or not; test_torch.py asks
    # for tensors itself.
    symm.set_default_backend("numpy")
    symm.init()
    yield symm.WORLD
    symm.finalize()
