"""The SimPy executor: the decode loop (:mod:`sim.engine.decode.decode`), the PCIe link (:mod:`sim.engine.decode.link`)
and the timeline export (:mod:`sim.engine.decode.timeline`). It owns simulated time; decisions are the policy's."""
