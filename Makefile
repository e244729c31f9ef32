# Thin wrapper around meson; the real build is meson.build.
#   make run    install what is missing, build, run the demo: an idle
#               guest under --sysidle (make run-library: the library alone)
#   make test   install what is missing, build, run every test: plain,
#               under ASan+UBSan, and the threaded parts (the library's
#               stress test, the VMM, the libvirt bridge) under TSan
#   make conformance  every kvm-unit-tests section under the VMM, plain
#               and with --sysidle, one line each (long: sections that
#               hang run to their timeout)
#   make bench  build and run the benchmarks
#   make fuzz   every fuzz target with libFuzzer (clang, ASan+UBSan) for
#               FUZZ_SECONDS each (default 600); `make test` runs each for
#               FUZZ_CI_SECONDS (45) and replays the corpus in every build
#   make install  build, then install under PREFIX (default /usr/local)
#               into DESTDIR (default: none): PREFIX=/usr for a system
#               install whose configuration is in /etc/sysidle
#   make install-check  a build whose prefix is $(BUILD)-install/prefix;
#               installs there and runs the installed programs (part of
#               `make test`)
#   make fleet-crash  sysidle-fleet and the hosts' libvirtds killed with
#               SIGKILL at every step of a pack, a standby, a wake and an
#               unpack on a test fleet (tests/fleet/); long, not in CI
#   make soak   16 idle VMs with random wake-ups, control clients and
#               hooks for 10 minutes; fails on RSS/fd growth or an unclean
#               exit (not in CI; SOAK_OPTS="--duration 60 --vms 4": short)
BUILD ?= build
MESON_OPTS ?=
ASAN_OPTS := -Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=all -Dmodel=false
TSAN_OPTS := -Db_sanitize=thread -Dmodel=false
# The fuzz build: clang, everything instrumented for libFuzzer's coverage,
# the targets linked with libFuzzer (tests/fuzz/README.md).
FUZZ_OPTS := -Dfuzzing=true -Db_sanitize=address,undefined -Dmodel=false \
	-Dc_args="-fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
FUZZ_SECONDS ?= 600
FUZZ_CI_SECONDS ?= 45

.PHONY: all deps build run run-library test conformance bench fuzz soak clean \
	install install-check fleet-crash

all: build

deps:
	@sh tools/install-deps.sh

# setup DIR OPTIONS: configure DIR once, then keep it.
define setup
	@if [ ! -f $(1)/build.ninja ]; then meson setup $(1) $(2) $(MESON_OPTS); fi
endef

build: deps
	$(call setup,$(BUILD),)
	ninja -C $(BUILD)

run: build
	@sh tools/demo-idle.sh $(BUILD)

# The state-machine library on its own, with simulated CPUs.
run-library: build
	./$(BUILD)/sysidle-demo

test: deps
	$(call setup,$(BUILD),)
	$(call setup,$(BUILD)-asan,$(ASAN_OPTS))
	$(call setup,$(BUILD)-tsan,$(TSAN_OPTS))
	ninja -C $(BUILD)
	ninja -C $(BUILD)-asan
	ninja -C $(BUILD)-tsan
	-meson test -C $(BUILD) --no-suite fleet-crash --print-errorlogs
	-meson test -C $(BUILD)-asan --print-errorlogs
	-meson test -C $(BUILD)-tsan --suite threads --suite vmm --suite libvirt --print-errorlogs
	$(call fuzz_run,$(FUZZ_CI_SECONDS))
	-$(MAKE) --no-print-directory install-check
	@python3 tools/test-summary.py $(BUILD) $(BUILD)-asan $(BUILD)-tsan \
		$(BUILD)-fuzz $(BUILD)-install

# fuzz_run SECONDS: build the fuzz targets, run each for SECONDS.
define fuzz_run
	@if [ ! -f $(BUILD)-fuzz/build.ninja ]; then \
		CC=clang meson setup $(BUILD)-fuzz $(FUZZ_OPTS) $(MESON_OPTS); fi
	meson configure $(BUILD)-fuzz -Dfuzz_seconds=$(1)
	ninja -C $(BUILD)-fuzz fuzz-targets
	-meson test -C $(BUILD)-fuzz --no-rebuild --suite fuzz --print-errorlogs
	@grep -h '^\(not \)\?ok 1 - fuzz-' $(BUILD)-fuzz/meson-logs/testlog.txt || true
endef

fuzz: deps
	$(call fuzz_run,$(FUZZ_SECONDS))
	@python3 tools/test-summary.py $(BUILD)-fuzz

conformance: build
	-python3 tests/conformance/kut_run.py --vmm $(BUILD)/vmm \
		| tee $(BUILD)/conformance-plain.txt
	-python3 tests/conformance/kut_run.py --vmm $(BUILD)/vmm --sysidle \
		| tee $(BUILD)/conformance-sysidle.txt
	python3 tests/conformance/kut_table.py $(BUILD)/conformance-plain.txt \
		$(BUILD)/conformance-sysidle.txt

bench: build
	./$(BUILD)/sysidle-bench
	python3 bench/vmm-rtt.py --build $(BUILD)
	python3 bench/idle-cost.py --build $(BUILD)
	python3 bench/vcpu-scale.py --build $(BUILD)
	python3 bench/density.py --build $(BUILD)
	python3 bench/latency.py --build $(BUILD)
	python3 bench/consolidate.py --build $(BUILD)
	python3 bench/bridge-cost.py --build $(BUILD)
	python3 bench/libvirt-wakeups.py --build $(BUILD)

PREFIX ?= /usr/local
DESTDIR ?=
# The prefix is compiled in (where the guests, the configuration and the
# Python package are looked for), so changing it reconfigures the build.
install: deps
	$(call setup,$(BUILD),)
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(DESTDIR))

INSTALL_CHECK_PREFIX = $(abspath $(BUILD)-install/prefix)
install-check: deps
	@if [ ! -f $(BUILD)-install/build.ninja ]; then \
		meson setup $(BUILD)-install -Dinstall_check=true -Dmodel=false \
			--prefix=$(INSTALL_CHECK_PREFIX) $(MESON_OPTS); fi
	ninja -C $(BUILD)-install
	meson test -C $(BUILD)-install --suite install --print-errorlogs

soak: build
	python3 tools/soak.py --build $(BUILD) $(SOAK_OPTS)

fleet-crash: build
	meson test -C $(BUILD) --suite fleet-crash --print-errorlogs

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
