"""The link's demand queue (:class:`sim.engine.link.Link`): a layer's waits queued at once land exactly
when one :meth:`~sim.engine.link.Link.submit` per copy would land them, a block copy is found by any of
its experts (:meth:`~sim.engine.link.Link.job_of`), and a link of a policy that never prefetches never
asks the core for a prefetch."""
import pytest
import simpy

from sim.engine.link import Link
from sim.protocol import DEMAND, Copy, Wait


class Core:
    """The link's side of the protocol core: records landings; prefetches are an error when
    ``prefetches`` is False."""

    def __init__(self, prefetches=True):
        self.landed_copies, self.prefetches = [], prefetches

    def landed(self, copy):
        self.landed_copies.append(copy)

    def prefetch_run(self, now, dt, horizon, report):
        assert self.prefetches, "a link that never prefetches asked for a prefetch"
        return None, now, 0

    def next_prefetch(self):
        assert self.prefetches, "a link that never prefetches asked for a prefetch"


def block_s(n):
    return 0.25 + 0.5 * n


WAITS = [Wait((0, 1), Copy(0, (1,), DEMAND), (1,), 0.0),
         Wait((0, 2), Copy(0, (2, 5, 7), DEMAND), (2,), 0.0),
         Wait((0, 5), None, (), 0.0),                       # in the block just queued
         Wait((0, 3), Copy(0, (3,), DEMAND), (3,), 0.0)]


def _link(prefetches=True):
    env = simpy.Environment()
    return env, Link(env, Core(prefetches), 1.0, prefetches=prefetches)


def test_waits_queued_at_once_land_as_one_submit_each():
    env, link = _link()
    env.run(until=0.5)
    jobs = link.submit_waits(WAITS, block_s)
    env2, ref = _link()
    env2.run(until=0.5)
    by_one = [ref.submit(w.copy, 1.0 if len(w.copy.experts) == 1 else block_s(len(w.copy.experts)))
              for w in WAITS if w.copy is not None]
    assert [jobs[0].land_at, jobs[1].land_at, jobs[3].land_at] == [j.land_at for j in by_one]
    assert jobs[2] is jobs[1] and link.demand_tail == ref.demand_tail
    env.run()
    assert all(j.done for j in jobs) and [c.experts for c in link.core.landed_copies] == [(1,), (2, 5, 7), (3,)]
    assert link.landing == {} and link.blocks == {}


def test_a_block_is_found_by_each_of_its_experts_until_it_lands():
    env, link = _link()
    (job,) = link.submit_waits([WAITS[1]], block_s)
    assert all(link.job_of((0, e)) is job for e in (2, 5, 7))
    with pytest.raises(KeyError):
        link.job_of((0, 3))
    with pytest.raises(KeyError):
        link.job_of((1, 2))
    env.run()
    with pytest.raises(KeyError):
        link.job_of((0, 5))


def test_a_link_that_never_prefetches_only_moves_demand_copies():
    env, link = _link(prefetches=False)
    link.wake()
    link.settle()
    env.run(until=1.0)
    jobs = link.submit_waits(WAITS[:2], block_s)
    env.run()
    assert [j.land_at for j in jobs] == [2.0, 2.0 + block_s(3)] and all(j.done for j in jobs)
