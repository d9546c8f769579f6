"""Lab: tools around the product, not on the path of a frame.

* :mod:`eyeblink.lab.bench` / :mod:`eyeblink.lab.bench_detector` — ``eyeblink bench`` throughput runs.
* :mod:`eyeblink.lab.evaluate` — ``eyeblink eval`` against annotated data sets.
* :mod:`eyeblink.lab.demo` — ``eyeblink demo``.
* :mod:`eyeblink.lab.synth` — synthetic face recordings with planted blinks (tests, demo, bench).
* :mod:`eyeblink.lab.loopback` — ``python -m eyeblink.lab.loopback``: a synthetic live stream sender.
* :mod:`eyeblink.lab.train` — ``eyeblink train-landmarks`` (the eye12 model).
"""
