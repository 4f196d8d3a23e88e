# Shortcuts for the README's commands.
.PHONY: setup demo test bench
setup:
	bash scripts/setup.sh
demo:
	bash scripts/demo.sh
test:
	bash scripts/test.sh
bench:
	bash scripts/setup.sh && .venv/bin/python benchmarks/datagen_speed.py
