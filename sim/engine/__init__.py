"""The SimPy executor: the decode loop (:mod:`sim.engine.decode`), the PCIe link (:mod:`sim.engine.link`)
and the timeline export (:mod:`sim.engine.timeline`). It owns simulated time; decisions are the policy's."""
