"""Test harness: plays datagen load into the engine under test and collects its outputs."""
