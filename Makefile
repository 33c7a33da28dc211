# The two commands of the README, and their parts.
#   make run   install what it needs, build the dlscale executables, run the main job
#   make test  install what the tests need too, build everything, run the test suite
#   make ctest the test suite alone, in a tree already built
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DLSCALE = $(BUILD_DIR)/dlscale

.PHONY: setup setup-run configure configure-run build build-run run check-html test ctest fuzz-build fuzz-smoke fuzz \
	bench clean

# Dependencies by profile (scripts/setup.sh): `run` for the build and the
# main job, `test` adds GoogleTest, clang, PyTorch and Slurm.
setup:
	bash scripts/setup.sh test

setup-run:
	bash scripts/setup.sh run

CONFIGURE = cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: setup
	$(CONFIGURE)

configure-run: setup-run
	$(CONFIGURE)

# Everything: both executables, the tests.
build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The executables alone: dlscale and dlscale-torch (what the main job runs).
build-run: configure-run
	cmake --build $(BUILD_DIR) -j $(JOBS) --target dlscale_cli

# The main job: examples/quickstart.yaml, a weak- and strong-scaling study of
# lenet and resnet18 (32x32) on 1 and 2 local workers (Gloo over loopback),
# 3 repeats each, stored in dlscale-results.db, then the HTML report. Running
# it again resumes: runs already stored are skipped.
DB ?= dlscale-results.db
REPORT ?= dlscale-report.html

run: build-run
	$(DLSCALE) models
	$(DLSCALE) sweep examples/quickstart.yaml --db $(DB) --html $(REPORT)
	$(DLSCALE) report --db $(DB) --sweep quickstart --type weak
	$(DLSCALE) report --db $(DB) --sweep quickstart --type strong
	@echo "results: $(DB) (dlscale results list --db $(DB)); report: $(REPORT)"

# Renders the HTML report in headless Chromium (installed on demand) and
# writes a screenshot next to it.
check-html: build-run
	bash scripts/setup.sh --with-chromium
	scripts/check_html.sh $(REPORT) $(REPORT:.html=.png) 4

# Twice JOBS tests at once, at most JOBS of them computing: each core is one
# `cpu` slot of the resource file, and a test that mostly waits takes none
# (tests/CMakeLists.txt, "CPU slots").
CPU_SLOTS = $(BUILD_DIR)/cpu-slots.json

test: build fuzz-smoke
	$(MAKE) --no-print-directory ctest

# ctest alone, in a tree already built.
ctest:
	@test -f $(BUILD_DIR)/CTestTestfile.cmake || \
	  { echo "make ctest: $(BUILD_DIR) holds no configured build; run 'make test'" >&2; exit 2; }
	@case '$(JOBS)' in ''|*[!0-9]*|0*) echo "make ctest: JOBS='$(JOBS)' is not a number of cores" >&2; exit 2;; esac
	@printf '{"version": {"major": 1, "minor": 0}, "local": [{"cpu": [{"id": "0", "slots": %s}]}]}\n' \
	  $(JOBS) > $(CPU_SLOTS)
	cd $(BUILD_DIR) && ctest -j $$((2 * $(JOBS))) --resource-spec-file $(abspath $(CPU_SLOTS)) \
	  --output-on-failure --no-tests=error

# libFuzzer harnesses (fuzz/): the expression language (sweep files and
# --where), sweep files through the planner, the rendezvous store's wire
# protocol, the record formats, IDX files, index sidecars and checkpoint files, under ASan
# and UBSan. `make test` runs each for FUZZ_SMOKE_RUNS
# executions; `make fuzz` for FUZZ_RUNS (see bench/README.md).
FUZZ_DIR ?= build-fuzz
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_RUNS ?= 1000000

fuzz-build: setup
	bash fuzz/build.sh $(FUZZ_DIR)

fuzz-smoke: fuzz-build
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SMOKE_RUNS) -seed=1

fuzz: fuzz-build
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_RUNS)

# Peer comparison (PyTorch eager on the same machine); see bench/README.md.
bench: build-run
	/usr/bin/python3 bench/run_peer_bench.py --dlscale $(DLSCALE)

clean:
	rm -rf $(BUILD_DIR)
