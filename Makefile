# make test: the whole suite, as CI runs it.
# make qemu: the unit tests of the Pi targets under qemu-user (part of test).
# make bench: the fan-out comparison (BenchmarkFanout: bare paho floor,
# bare net/http handler, the hub, and Node-RED when node and npm are there)
# the hub's footprint (BenchmarkFootprint) and its CPU time per command
# beside the bare handler's (BenchmarkCPUPerCommand), as tables. Loopback only;
# Node-RED is installed with npm into a temporary directory (NODE_RED_DIR
# may name an existing install). Not part of make test.
# make dist: switchbridge for every hub target (linux arm64, armv7, armv6
# and amd64), statically linked without cgo, in dist/. The target list
# lives in .ci/cross-build.

GO ?= go
DIST ?= dist
FUZZTIME ?= 10s
BENCH_REQUESTS ?= 200
BENCH_N ?= 1,10,100

.PHONY: test lint unit fuzz cross qemu dist clean bench

test: lint unit fuzz cross qemu

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
# race detector's shadow memory is never given back).
unit:
	$(GO) test -race -count=1 -timeout 8m ./...
	$(GO) test -count=1 -run '^TestBrowser|^TestDaemonBrokerSubscriptionFlood$$' ./bridge/daemon ./cmd/switchbridge

# Each fuzz target runs briefly with coverage guidance, from its seed
# corpus: the inputs earlier runs kept in the build cache make the baseline
# grow until gathering it alone outlasts FUZZTIME, which go test reports
# as a failure (context deadline exceeded).
fuzz:
	$(GO) clean -fuzzcache
	$(GO) test -run '^$$' -fuzz '^FuzzRouterMatch$$' -fuzztime $(FUZZTIME) ./bridge/api
	$(GO) test -run '^$$' -fuzz '^FuzzParseAuthorizeRequest$$' -fuzztime $(FUZZTIME) ./bridge/oauth
	$(GO) test -run '^$$' -fuzz '^FuzzParsers$$' -fuzztime $(FUZZTIME) ./drivers/mqtt
	$(GO) test -run '^$$' -fuzz '^FuzzEmbeddedBroker$$' -fuzztime $(FUZZTIME) ./drivers/mqtt
	$(GO) test -run '^$$' -fuzz '^FuzzDaemonBroker$$' -fuzztime $(FUZZTIME) ./bridge/daemon

# The cross-compiled targets must build, and the Pi binaries must run:
# the ARMv6 (Pi Zero, Pi 1) and arm64 builds serve the demo under qemu-user.
cross:
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	GO=$(GO) ./.ci/cross-build "$$d" && \
	./.ci/qemu-demo qemu-arm "$$d/switchbridge-linux-armv6" && \
	./.ci/qemu-demo qemu-aarch64 "$$d/switchbridge-linux-arm64"

# The unit tests of the Pi targets under Debian's qemu-user: ARMv6 is
# 32-bit, where a misaligned 64-bit atomic or an int overflow shows, and
# arm64 is what most hubs run. No race detector (it needs cgo and amd64 or
# arm64 hosts). SWITCHBRIDGE_TEST_EMULATED makes the tests that cannot run
# under emulation skip: those that run the test binary as a process (the
# kernel cannot execute a foreign binary without binfmt_misc) and the
# browser test. Tests that start Mosquitto or promtool still run: qemu-user
# hands a host binary to the kernel, which runs it natively.
QEMU_PKGS ?= ./...
qemu:
	CGO_ENABLED=0 GOARCH=arm GOARM=6 SWITCHBRIDGE_TEST_EMULATED=qemu-arm \
		$(GO) test -count=1 -timeout 8m -exec qemu-arm $(QEMU_PKGS)
	CGO_ENABLED=0 GOARCH=arm64 SWITCHBRIDGE_TEST_EMULATED=qemu-aarch64 \
		$(GO) test -count=1 -timeout 8m -exec qemu-aarch64 $(QEMU_PKGS)

# Timed requests per target and N, and the plug counts, can be changed:
# make bench BENCH_REQUESTS=400 BENCH_N=1,100
bench:
	$(GO) test -run '^$$' -bench '^BenchmarkFanout$$' -benchtime 1x -timeout 30m ./drivers/mqtt \
		-fanout.requests=$(BENCH_REQUESTS) -fanout.n=$(BENCH_N)
	$(GO) test -run '^$$' -bench '^BenchmarkFootprint$$' -benchtime 3x -timeout 10m ./cmd/switchbridge
	$(GO) test -run '^$$' -bench '^BenchmarkCPUPerCommand$$' -benchtime 3x -timeout 10m ./cmd/switchbridge

dist:
	GO=$(GO) ./.ci/cross-build $(DIST)

clean:
	rm -rf $(DIST)
