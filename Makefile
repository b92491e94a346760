# The two set-up commands of the README:
#   make demo   install what is missing, build, train the default model
#   make test   install what is missing, build, run every test
# and the installation:
#   make install   build, then install the program, libptrain, ptrain.h, the man
#                  page, ptrain.pc and the CMake package under PREFIX (default
#                  /usr/local); DESTDIR=dir stages them under dir/PREFIX
# Options: SANITIZE=1 (AddressSanitizer + UBSan, in build-san), BUILD=dir.
SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build-san
CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPT_SANITIZE=ON
else
BUILD ?= build
CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=Release
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
CMAKE_FLAGS += -DCMAKE_INSTALL_PREFIX=$(PREFIX)

.PHONY: all deps configure build demo test install fuzz clean

all: build

deps:
	@scripts/install-deps.sh

# cmake's chatter goes to a log; its own lines, such as whether CUDA is
# built, are shown (its errors go to stderr, shown as they come).
configure: deps
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >$(BUILD)/configure.log || { cat $(BUILD)/configure.log; exit 1; }
	@sed -n 's/^-- ptrain: /ptrain: /p' $(BUILD)/configure.log

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/ptrain train --model mnist-cnn --dataset fashion-mnist --epochs 1

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

# libFuzzer targets for the file readers (needs clang).
fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DPT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf build build-san build-fuzz
