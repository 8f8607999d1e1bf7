"""Shared fixtures: the module under test and the scene generator, both
from the build folder on PYTHONPATH (ctest sets it)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # brute.py

STRUCTURES = ["bvh", "sweep", "automatic"]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def bp():
    import broadphase
    return broadphase


@pytest.fixture(scope="session")
def tk():
    import _bp_testkit
    return _bp_testkit
