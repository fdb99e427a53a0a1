# The two commands: `make demo` runs a research on the embedded defaults, `make test` runs the tests.
Q ?= How do I run a subprocess and capture its output?
MODE ?= light
OPT ?= balanced

.PHONY: demo run test eval bench bootstrap worker

demo: bootstrap
	.venv/bin/python -m deep_research.demo --question "$(Q)" --mode $(MODE) --optimization $(OPT)

run: demo

test: bootstrap
	.venv/bin/python -m pytest -q

eval: bootstrap
	.venv/bin/python -m deep_research.eval

bench: bootstrap
	.venv/bin/python bench/crawl_concurrency.py

worker: bootstrap
	.venv/bin/python worker.py

bootstrap:
	@bash scripts/bootstrap.sh
