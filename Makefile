# Shortcuts over CMake. `make test` is the one command that builds and runs
# every test; `make run` draws a picture with the model shipped in models/.
# CUDA=OFF (or ON, AUTO) sets the CUDA backend for release, test, asan and run:
# AUTO, CMake's default, builds it when nvcc is found, which makes the first
# build several times longer (README, Build). VULKAN=OFF (or ON, AUTO) does
# the same for the Vulkan backend (AUTO: built when the Vulkan headers and
# glslc are found). Unset, a build directory keeps what it was configured with.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE ?= cmake
FUZZ_SECONDS ?= 30
CUDA ?=
VULKAN ?=
CUDA_FLAG = $(if $(CUDA),-DCORTIQ_CUDA=$(CUDA)) $(if $(VULKAN),-DCORTIQ_VULKAN=$(VULKAN))
FUZZ_LONG_SECONDS ?= 1800
FUZZ_LONG_RUNS ?= 10000000

.PHONY: all release test asan fuzz fuzz-build fuzz-long run bench clean header-check test-gpu cross-arm64 install

all: release

release:
	@$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAG) >/dev/null
	@$(CMAKE) --build $(BUILD) -j $(JOBS)

test: release
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE gpu

# AddressSanitizer + UndefinedBehaviorSanitizer build and the same tests.
asan:
	@$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCORTIQ_SANITIZE=ON $(CUDA_FLAG) >/dev/null
	@$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS) -LE 'gpu|slow'

# libFuzzer targets (clang), one process at a time (tests/fuzz/run.sh): each
# replays tests/fuzz/regress, then fuzzes for FUZZ_SECONDS on its seed corpus;
# a crash fails it and its input is kept in build-fuzz/artifacts/.
fuzz-build:
	@CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCORTIQ_FUZZ=ON >/dev/null
	@$(CMAKE) --build build-fuzz -j $(JOBS)

fuzz: fuzz-build
	@tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# The long run: each target until FUZZ_LONG_RUNS executions or
# FUZZ_LONG_SECONDS, whichever comes first (docs/FUZZING.md has the numbers).
fuzz-long: fuzz-build
	@tests/fuzz/run.sh build-fuzz $(FUZZ_LONG_SECONDS) $(FUZZ_LONG_RUNS)

header-check: release
	@echo "include/cortiq.h compiles alone as strict C11"

# GPU tests (on a machine with an NVIDIA GPU and the CUDA toolkit).
test-gpu:
	@$(CMAKE) -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCORTIQ_CUDA=ON >/dev/null
	@$(CMAKE) --build build-gpu -j $(JOBS)
	cd build-gpu && ctest --output-on-failure -L gpu

# The main job: draw a picture with the model shipped in models/ (models/shapes.md).
RUN_PROMPT ?= a red circle on a blue background
run: release
	@if [ ! -f models/shapes.cmf ]; then \
		echo "make run: models/shapes.cmf is missing (it ships with the repository; is the checkout complete?)" >&2; \
		exit 1; \
	fi
	./$(BUILD)/cortiq imagine models/shapes.cmf "$(RUN_PROMPT)" --size 256x256 --steps 20 -o shapes.png

# Cross-build the library, the CLI and the kernel tests for 64-bit Arm
# (Debian's gcc-aarch64-linux-gnu with the arm64 -dev packages, see .ci/run)
# and run the kernel tests under qemu-user: the NEON kit's check. One thread
# per backend (qemu-user threads hang on some hosts).
cross-arm64:
	@$(CMAKE) -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release -DCORTIQ_CUDA=OFF -DCORTIQ_FFMPEG=OFF >/dev/null
	@$(CMAKE) --build build-arm64 -j $(JOBS) --target cortiq_static cortiq test_ops test_cpu_kits
	cd build-arm64 && CQ_TEST_OPS_THREADS=1 ctest --output-on-failure -R '^test_(cpu_kits|ops)$$'

# Install the shared library, include/cortiq.h, cortiq.pc (pkg-config) and the cortiq command under
# PREFIX (default /usr/local), staged under DESTDIR when set (packaging).
PREFIX ?= /usr/local
install: release
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(BUILD) --prefix "$(PREFIX)"

bench: release
	./$(BUILD)/cortiq bench gemm --quick

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-gpu build-arm64
