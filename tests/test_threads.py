"""mt/threads.py: how many threads each process takes."""

from mt.threads import available_cores, threads_for


def test_threads_for_shares_the_cores_out():
    cores = available_cores()
    assert threads_for(3) == 3
    assert threads_for(0) == cores and threads_for(0, 2) == max(1, cores // 2)
    assert threads_for(0, 10 * cores) == 1
