# make check: the loop to run before each commit, under two minutes on two
# cores with warm caches (81 s measured with CHECKFLAGS=-count=1): gofmt, vet, staticcheck
# and every test in -short mode, without the race detector, emulation,
# the packages' chroot install, the browser, PostgreSQL or the long soaks.
# Passing packages are cached as go test caches them; make check
# CHECKFLAGS=-count=1 runs every test again.
# make test: the whole suite, as CI runs it.
# make qemu: the unit tests of the packages that differ by CPU, on the Pi
# targets under qemu-user (part of test).
# make deb: the Debian packages' tests, an install in a chroot included
# (part of test).
# make bench: the fan-out comparison (BenchmarkFanout: bare paho floor,
# bare net/http handler, the hub, and Node-RED when node and npm are there),
# the hub's footprint (BenchmarkFootprint), its CPU time per command
# beside the bare handler's (BenchmarkCPUPerCommand) and its event streams
# (BenchmarkEventStreams: report to event, 1,000 streams), as tables, and
# the platform at scale on SQLite and on PostgreSQL with one and two
# processes (BenchmarkHubLinksScale: HUB_LINKS hub links, default 1000;
# BenchmarkTokenRate: token and discovery requests per second). Loopback only;
# Node-RED is installed with npm into a temporary directory (NODE_RED_DIR
# may name an existing install). Not part of make test.
# make bench-components: where the hub's CPU per command goes beside the
# bare handler's (BenchmarkCPUComponents: the hub whole and without one
# component at a time, interleaved; three runs). BENCH_BASELINE=<git rev>
# adds that revision's binary for a before/after comparison in the same
# run; BENCH_PROFILE=<dir> writes each variant's CPU profile there.
# make dist: switchbridge for every hub target (linux arm64, armv7, armv6
# and amd64), statically linked without cgo, in dist/. The target list
# lives in .ci/cross-build. VERSION=v1.2.3 names the build (default: the
# checkout's tag, or a pseudo-version: .ci/version).
# make package: make dist plus the Debian packages
# dist/switchbridge_<version>_{armhf,arm64,amd64}.deb, built by nfpm
# (systemd/deb); armhf is the ARMv6 binary, for every 32-bit Pi.

GO ?= go
DIST ?= dist
FUZZTIME ?= 10s
BENCH_REQUESTS ?= 200
BENCH_N ?= 1,10,100
HUB_LINKS ?= 1000

.PHONY: check test beside-unit lint unit fuzz cross qemu deb dist package clean bench bench-components

# The race-built unit tests mostly wait on processes, sockets and timers
# (about 1.5 of the two cores, measured), and the rest (fuzzing, the Pi
# builds, the emulated tests, the packages) mostly on builds and qemu: so
# the two run side by side after lint, each target's output printed
# whole when it ends.
test: lint
	$(MAKE) --no-print-directory -j2 -Otarget unit beside-unit

beside-unit:
	$(MAKE) --no-print-directory fuzz cross qemu deb

# -short skips each test that takes seconds for what make test proves
# (PostgreSQL, the browser, the packages, a daemon started many times, a
# wait for a 10 s timeout), saying why; the fast core of each behaviour
# stays. The short tests mostly wait on sockets, processes and timers:
# four packages at once (-p 4) keep two cores busy.
CHECKFLAGS ?=
check: lint
	$(GO) test -short -p 4 -timeout 5m $(CHECKFLAGS) ./...

# Formatting, vet and staticcheck problems fail the suite. staticcheck is
# pinned as a tool in go.mod, so it comes from the module proxy.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# Every package under the race detector; each package's fuzz targets run
# their seed corpus here. The browser test is left out of the race build
# (chromedp races internally) and runs on its own, and so does the broker's
# subscription flood once more, where its resident size is measured (the
# race detector's shadow memory is never given back). Four test binaries
# at once (-p 4): each mostly waits, and two left a core idle. The
# timeout is a guard against a hang, not a budget: bridge/daemon and
# cmd/switchbridge take about 6 minutes each on 2 cores, and passed 8
# beside a CPU hog while the cross builds compiled from a cold cache.
unit:
	$(GO) test -race -count=1 -p 4 -timeout 20m $$($(GO) list ./... | grep -v '/systemd/deb$$')
	$(GO) test -count=1 -run '^TestBrowser|^TestDaemonBrokerSubscriptionFlood$$' ./bridge/daemon ./cmd/switchbridge

# Each fuzz target runs briefly with coverage guidance, from its seed
# corpus: the inputs earlier runs kept in the build cache make the baseline
# grow until gathering it alone outlasts FUZZTIME, which go test reports
# as a failure (context deadline exceeded). One worker each (-parallel
# 1): make test runs this beside the unit tests, which need the other
# core.
FUZZFLAGS = -fuzztime $(FUZZTIME) -parallel 1
fuzz:
	$(GO) clean -fuzzcache
	$(GO) test -run '^$$' -fuzz '^FuzzRouterMatch$$' $(FUZZFLAGS) ./bridge/hub/api
	$(GO) test -run '^$$' -fuzz '^FuzzParseAuthorizeRequest$$' $(FUZZFLAGS) ./bridge/platform/oauth
	$(GO) test -run '^$$' -fuzz '^FuzzParsers$$' $(FUZZFLAGS) ./drivers/mqtt
	$(GO) test -run '^$$' -fuzz '^FuzzEmbeddedBroker$$' $(FUZZFLAGS) ./drivers/mqtt
	$(GO) test -run '^$$' -fuzz '^FuzzAnnouncements$$' $(FUZZFLAGS) ./drivers/mqtt
	$(GO) test -run '^$$' -fuzz '^FuzzDaemonBroker$$' $(FUZZFLAGS) ./bridge/daemon

# The cross-compiled targets must build, and the Pi binaries must run:
# the ARMv6 build serves the demo under qemu-user on the Pi Zero's core
# (arm1176), and the arm64 build under qemu-aarch64. The ARMv7 build must
# fail on that core (Go refuses to start a GOARM=7 binary without VFPv3),
# or the ARMv6 check would prove nothing.
ARMV6_CPU = qemu-arm -cpu arm1176
cross:
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	GO=$(GO) ./.ci/cross-build "$$d" && \
	./.ci/qemu-demo "$(ARMV6_CPU)" "$$d/switchbridge-linux-armv6" && \
	./.ci/qemu-demo qemu-aarch64 "$$d/switchbridge-linux-arm64" && \
	if timeout 60 $(ARMV6_CPU) "$$d/switchbridge-linux-armv7" version >"$$d/armv7.log" 2>&1; then \
		echo "cross: the GOARM=7 binary ran on $(ARMV6_CPU): the ARMv6 check proves nothing" >&2; exit 1; \
	fi && \
	grep -q 'cannot run this GOARM=7 binary\|Illegal instruction' "$$d/armv7.log" || \
		{ echo "cross: the GOARM=7 binary failed on $(ARMV6_CPU), but not for its instruction set:" >&2; cat "$$d/armv7.log" >&2; exit 1; }; \
	echo "cross: the GOARM=7 binary does not run on $(ARMV6_CPU), as expected"

# The unit tests of the packages whose behaviour depends on the CPU, on
# the Pi targets under Debian's qemu-user: ARMv6 (on the Pi Zero's core)
# is 32-bit, where a misaligned 64-bit atomic or an int overflow shows,
# and arm64 is what most hubs run. Those packages: the domain (bridge:
# atomics, integer sizes), bridge/config (integer keys decoded into int),
# bridge/infra/certs and bridge/store (syscall structs; SQLite's pure-Go build,
# translated from C for each architecture), drivers/gpio (periph's
# ioctls) and drivers/mqtt (the embedded broker's 64-bit counters). The
# rest is the same Go on every CPU and runs natively in unit; run under
# emulation as well, it made make qemu take 17 minutes (the build cache
# partly cold) instead of 70 s. In -short mode, as make check: the store
# on SQLite, not PostgreSQL, and without the broker's soaks, whose timing
# and SQL are the same on every CPU and run natively in unit. Every
# package and its tests is still compiled for both targets (go vet), and
# cross serves the demo from the ARMv6 and arm64 binaries. No race
# detector (it needs cgo and amd64 or arm64 hosts).
# SWITCHBRIDGE_TEST_EMULATED makes the tests that cannot run under
# emulation skip: those that run the test binary as a process (the kernel
# cannot execute a foreign binary without binfmt_misc) and the browser
# test. Tests that start Mosquitto or promtool still run: qemu-user hands
# a host binary to the kernel, which runs it natively.
# make qemu QEMU_PKGS=./... runs every package's tests there.
QEMU_PKGS ?= ./bridge ./bridge/config ./bridge/infra/certs ./bridge/store ./drivers/gpio ./drivers/mqtt
qemu:
	CGO_ENABLED=0 GOARCH=arm GOARM=6 $(GO) vet ./...
	CGO_ENABLED=0 GOARCH=arm GOARM=6 SWITCHBRIDGE_TEST_EMULATED=qemu-arm \
		$(GO) test -short -count=1 -timeout 8m -exec "$(ARMV6_CPU)" $(QEMU_PKGS)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) vet ./...
	CGO_ENABLED=0 GOARCH=arm64 SWITCHBRIDGE_TEST_EMULATED=qemu-aarch64 \
		$(GO) test -short -count=1 -timeout 8m -exec qemu-aarch64 $(QEMU_PKGS)

# The Debian packages (systemd/deb): built as make package builds them,
# read with dpkg-deb, checked by lintian, run under qemu on the Pi Zero's
# core, and installed, upgraded, removed and purged with apt in a Debian
# bookworm chroot (root only; the base system is made once by mmdebstrap
# and kept in the Go build cache). After cross, whose compiled packages
# the package build reuses, so it only links; not in unit, whose -race
# and timeout are for Go code.
deb:
	$(GO) test -count=1 -timeout 15m ./systemd/deb

# Timed requests per target and N, and the plug counts, can be changed:
# make bench BENCH_REQUESTS=400 BENCH_N=1,100
bench:
	$(GO) test -run '^$$' -bench '^BenchmarkFanout$$' -benchtime 1x -timeout 30m ./bridge/daemon \
		-fanout.requests=$(BENCH_REQUESTS) -fanout.n=$(BENCH_N)
	$(GO) test -run '^$$' -bench '^BenchmarkFootprint$$' -benchtime 3x -timeout 10m ./cmd/switchbridge
	$(GO) test -run '^$$' -bench '^BenchmarkDiskWrites$$' -benchtime 1x -timeout 10m ./cmd/switchbridge
	$(GO) test -run '^$$' -bench '^BenchmarkCPUPerCommand$$' -benchtime 3x -timeout 10m ./cmd/switchbridge
	$(GO) test -run '^$$' -bench '^BenchmarkEventStreams$$' -benchtime 1x -timeout 10m ./cmd/switchbridge
	$(GO) test -run '^$$' -bench '^BenchmarkHubLinksScale$$' -benchtime 1x -timeout 30m ./cmd/switchbridge \
		-hublinks.n=$(HUB_LINKS)
	$(GO) test -run '^$$' -bench '^BenchmarkTokenRate$$' -benchtime 1x -timeout 10m ./cmd/switchbridge

BENCH_COMMANDS ?= 20000
BENCH_BASELINE ?=
BENCH_PROFILE ?=
bench-components:
	$(GO) test -run '^$$' -bench '^BenchmarkCPUComponents$$' -benchtime 3x -timeout 60m ./cmd/switchbridge \
		-components.commands=$(BENCH_COMMANDS) -components.baseline=$(BENCH_BASELINE) -components.cpuprofile=$(if $(BENCH_PROFILE),$(abspath $(BENCH_PROFILE)))

dist:
	GO=$(GO) ./.ci/cross-build $(DIST)

package:
	GO=$(GO) ./.ci/package $(DIST)

clean:
	rm -rf $(DIST)
