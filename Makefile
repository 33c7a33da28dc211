# The two commands of the README, and their parts.
#   make run   install dependencies, build, run the main job
#   make test  install dependencies, build, run the test suite
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DLSCALE = $(BUILD_DIR)/dlscale

.PHONY: setup configure build run test bench clean

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: ResNet-18 on CIFAR-size synthetic data, on one worker and on
# two local workers (Gloo over loopback, weak scaling), each writing its JSON
# result record next to the build.
run: build
	$(DLSCALE) models
	$(DLSCALE) train --model resnet18 --image-size 32 --batch 32 --steps 20 --warmup 3 \
	    --json $(BUILD_DIR)/resnet18-1w.json
	$(DLSCALE) train --model resnet18 --image-size 32 --batch 32 --steps 20 --warmup 3 \
	    --workers 2 --json $(BUILD_DIR)/resnet18-2w.json
	@echo "result records: $(BUILD_DIR)/resnet18-1w.json $(BUILD_DIR)/resnet18-2w.json"

test: build
	cd $(BUILD_DIR) && ctest -j $(JOBS) --output-on-failure

# Peer comparison (PyTorch eager on the same machine); see bench/README.md.
bench: build
	/usr/bin/python3 bench/run_peer_bench.py --dlscale $(DLSCALE)

clean:
	rm -rf $(BUILD_DIR)
