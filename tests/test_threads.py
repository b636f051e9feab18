"""mt/threads.py: how many threads, and how long they spin before they sleep."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from mt.threads import SPINCOUNT, available_cores, threads_for


def spincount_seen(**env: str) -> str:
    """GOMP_SPINCOUNT as a process that has imported mt sees it (`import mt` loads no torch, so
    OpenMP, loaded with torch later, reads it)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    code = ("import mt, os, sys; assert 'torch' not in sys.modules; "
            "print(os.environ.get('GOMP_SPINCOUNT'))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**clean, **env}, check=True).stdout.strip()


@pytest.mark.parametrize(("env", "seen"), [
    ({}, SPINCOUNT),
    ({"GOMP_SPINCOUNT": "300000"}, "300000"),  # the user's own wins
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "None"),  # so does a wait policy
])
def test_threads_spin_briefly_unless_told_otherwise(env, seen):
    assert spincount_seen(**env) == seen


def test_threads_for_shares_the_cores_out():
    cores = available_cores()
    assert threads_for(3) == 3
    assert threads_for(0) == cores and threads_for(0, 2) == max(1, cores // 2)
    assert threads_for(0, 10 * cores) == 1
