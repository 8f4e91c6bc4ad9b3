# The README's two commands: `make demo` and `make test`. Everything else is
# plain CMake underneath (build/, build-asan/, build-tsan/).
JOBS ?= 2
CMAKE ?= cmake
DEMO_BUILD ?= build
DEMO_FLAGS ?= --model mlp --data data/mnist --epochs 3 --batch-size 64 --optimizer adam --lr 0.001 --stats --histogram $(DEMO_BUILD)/GradientHistogram.png

.PHONY: all deps deps-test build demo test test-asan test-tsan bench bench-gpu fuzz fuzz-run install clean

all: build

deps:
	@scripts/install-deps.sh build

deps-test:
	@scripts/install-deps.sh test

build: deps
	@$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@$(CMAKE) --build build -j $(JOBS)

# the demo builds only the CLI it runs (the compiler's lines go to a log,
# shown when the build fails), then prints the training
demo: deps
	@test -f $(DEMO_BUILD)/CMakeCache.txt || $(CMAKE) -S . -B $(DEMO_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@echo "building the tensorscope CLI (log: $(DEMO_BUILD)/demo-build.log)"
	@$(CMAKE) --build $(DEMO_BUILD) -j $(JOBS) --target tensorscope_cli >$(DEMO_BUILD)/demo-build.log 2>&1 || \
		{ tail -n 40 $(DEMO_BUILD)/demo-build.log; echo "the build failed: $(DEMO_BUILD)/demo-build.log"; exit 1; }
	@echo "$(DEMO_BUILD)/tensorscope train $(DEMO_FLAGS)"
	@$(DEMO_BUILD)/tensorscope train $(DEMO_FLAGS)

test: deps-test build
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan: deps-test
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON >/dev/null
	@$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$(CURDIR)/tests/lsan.supp print_suppressions=0" UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

test-tsan: deps-test
	@$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTS_TSAN=ON >/dev/null
	@$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp ctest --output-on-failure -j $(JOBS)

bench: deps-test build
	bench/run.sh build

# the GPU rows beside PyTorch on the same GPU (a GPU machine; scripts/gpu-check.sh)
bench-gpu:
	GPU_CHECK_TESTS=0 scripts/gpu-check.sh

# libFuzzer targets with the library instrumented (coverage + ASan/UBSan)
fuzz: deps-test
	@$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTS_FUZZ=ON -DTS_BUILD_TESTS=OFF >/dev/null
	@$(CMAKE) --build build-fuzz -j $(JOBS)

# each target for FUZZ_SECONDS (default 60), FUZZ_JOBS at a time; exit 1 on a finding
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
fuzz-run: fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) scripts/fuzz-run.sh build-fuzz

install: build
	$(CMAKE) --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz
