# The two commands of the README, and their parts.
#   make run   install dependencies, build, run the main job
#   make test  install dependencies, build, run the test suite
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DLSCALE = $(BUILD_DIR)/dlscale

.PHONY: setup configure build run check-html test fuzz-build fuzz-smoke fuzz bench clean

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: examples/quickstart.yaml, a weak- and strong-scaling study of
# lenet and resnet18 (32x32) on 1 and 2 local workers (Gloo over loopback),
# 3 repeats each, stored in dlscale-results.db, then the HTML report. Running
# it again resumes: runs already stored are skipped.
DB ?= dlscale-results.db
REPORT ?= dlscale-report.html

run: build
	$(DLSCALE) models
	$(DLSCALE) sweep examples/quickstart.yaml --db $(DB) --html $(REPORT)
	$(DLSCALE) report --db $(DB) --sweep quickstart --type weak
	$(DLSCALE) report --db $(DB) --sweep quickstart --type strong
	@echo "results: $(DB) (dlscale results list --db $(DB)); report: $(REPORT)"

# Renders the HTML report in headless Chromium (installed on demand) and
# writes a screenshot next to it.
check-html: build
	bash scripts/setup.sh --with-chromium
	scripts/check_html.sh $(REPORT) $(REPORT:.html=.png) 4

test: build fuzz-smoke
	cd $(BUILD_DIR) && ctest -j $(JOBS) --output-on-failure

# libFuzzer harnesses (fuzz/): the expression language (sweep files and
# --where), sweep files through the planner, the rendezvous store's wire
# protocol, the record formats, IDX files and checkpoint files, under ASan
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
bench: build
	/usr/bin/python3 bench/run_peer_bench.py --dlscale $(DLSCALE)

clean:
	rm -rf $(BUILD_DIR)
