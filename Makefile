# SPDX-License-Identifier: Apache-2.0
# Thin front door over CMake: `make demo`, `make test`, `make bench`,
# `make image` (the OCI image, $(BUILD)/gpuslice-image.tar, with buildah; no pull),
# `make install` / `make uninstall` (PREFIX, default /usr/local; DESTDIR for staging;
# NOBUILD=1 installs the build as it is), `make ptx` (regenerates sim/kernels/gs_kernels.ptx with nvcc; the build itself
# needs no nvcc), `make deps` (scripts/install-deps only).
# SANITIZE=1 builds and tests under AddressSanitizer + UndefinedBehaviorSanitizer.
# WERROR=1 turns warnings into errors (CI sets it).

JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
WERROR   ?= 0
SANITIZE ?= 0
BUILD    ?= $(if $(filter 1,$(SANITIZE)),build-asan,build)
CTEST_ARGS ?=
PREFIX   ?= /usr/local
DESTDIR  ?=
NOBUILD  ?= 0

CMAKE_FLAGS = -DGS_WERROR=$(if $(filter 1,$(WERROR)),ON,OFF) \
              -DGS_SANITIZE=$(if $(filter 1,$(SANITIZE)),ON,OFF)

.PHONY: all deps build test demo bench clean fuzz image ptx install uninstall

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	@scripts/demo $(BUILD)

bench: build
	@scripts/bench $(BUILD)

# gpuslice, gpusliced (and gpuslice-extender) in PREFIX/bin, the shim in
# PREFIX/lib/gpuslice, the systemd unit in PREFIX/lib/systemd/system, the docs in
# PREFIX/share/doc/gpuslice, the bash completion in
# PREFIX/share/bash-completion/completions/gpuslice and the man pages in
# PREFIX/share/man/man1 (cmake/GsInstall.cmake; docs/daemon.md, Which daemon).
install: $(if $(filter 1,$(NOBUILD)),,build)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# What install would put under DESTDIR/PREFIX (listed by installing into a
# scratch directory), removed; then the directories of our own, when empty.
uninstall:
	@test -f $(BUILD)/CMakeCache.txt || { echo "uninstall: no build in $(BUILD)" >&2; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  DESTDIR="$$tmp" cmake --install $(BUILD) --prefix "$(PREFIX)" >/dev/null && \
	  (cd "$$tmp" && find . ! -type d | sed 's|^\.||') | while read -r f; do \
	    if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then rm -f "$(DESTDIR)$$f" && echo "removed $(DESTDIR)$$f"; fi; \
	  done; \
	  rmdir "$(DESTDIR)$(PREFIX)/lib/gpuslice" "$(DESTDIR)$(PREFIX)/share/doc/gpuslice" 2>/dev/null || true

# FROM scratch: the build's binaries, the shim and the libraries they link
# (docs/kubernetes.md, Building the image). Needs root (buildah's storage).
image: build
	@scripts/build-image $(BUILD)

# The project kernels' PTX in the repository, regenerated with nvcc (the toolkit);
# the ctest ptx_drift says when it is due.
ptx: deps $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) --target ptx

# libFuzzer builds of every parser (clang).
fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DGS_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf build build-asan build-fuzz
