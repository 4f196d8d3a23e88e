"""End-to-end runs as library functions: datagen -> querygen -> translate -> run -> validate.

Each takes a typed request (the resolved `kit.config.Config` among it, loaded once by the command)
and writes one new run directory.
"""
