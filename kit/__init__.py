"""Shared core of cepkit: data model, config, scale-factor maths, rate profiles, errors, CLI.

`kit` imports none of the other cepkit packages; everything else may import it.
"""

__version__ = "0.1.0"
