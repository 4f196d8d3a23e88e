"""The floor of cepkit: records, config, scale model, rate profiles, workload models, the wire
between harness and engine, atomic outputs and errors.

`kit` imports none of the other cepkit packages; every other package may import it.
"""

__version__ = "0.1.0"
