# The README's two commands: `make demo` (main job) and `make test` (type check + the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CT := $(VENV)/bin/capture-trainer
OUT ?= runs/demo

.PHONY: setup warm test demo bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# numba compiles the kernels into its cache here (about 90 s on a fresh clone, seconds
# after), not in the first trial: a paced trial on a device must never stall compiling
warm: setup
	$(CT) warm-up

test: warm
	$(PY) -m mypy
	$(PY) -m pytest

demo: warm
	$(CT) demo --out $(OUT)

bench: warm
	for model in planar-3r spatial-7dof; do \
		$(CT) bench servo --model $$model --json; \
		$(CT) bench throughput --model $$model --json; \
		$(CT) bench reaction --model $$model --json; \
	done
	$(CT) bench device-loop --json
	$(CT) bench window --json
	$(CT) bench study --json

clean:
	rm -rf $(VENV) runs build *.egg-info
	find . -path ./.git -prune -o \( -name '*.nbi' -o -name '*.nbc' \) -exec rm -f {} +
