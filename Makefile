# Thin wrapper over CMake: `make` builds into build/, `make test` runs every CPU test.
BUILD ?= build
CMAKE_FLAGS ?=
# SYMM_WERROR=1 (CI) turns warnings into errors.
ifneq ($(SYMM_WERROR),)
CMAKE_FLAGS += -DSYMM_WERROR=ON
endif
JOBS ?= $(shell nproc)

.PHONY: all test clean demo
all:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: all
	cd $(BUILD) && ctest --output-on-failure -LE gpu -j $(JOBS)

demo: all
	$(BUILD)/bin/symmrun -n 4 $(BUILD)/bin/moe_demo

clean:
	rm -rf $(BUILD)
