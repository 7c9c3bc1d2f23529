"""Events injected into a simulation's run (``/sim inject``, a fork with an event).

``request`` checks a request and queues the event in the run's injections file
(``engine.sim.run.injections``, read by the run's child, whose ``injector`` publishes each event
at the start of its round); ``logged`` reads back what the run published.
"""
