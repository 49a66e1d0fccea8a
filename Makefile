# make test: the whole suite, as CI runs it.
# make dist: switchbridge for every hub target (linux arm64, armv7, armv6
# and amd64), statically linked without cgo, in dist/. The target list
# lives in .ci/cross-build.

GO ?= go
DIST ?= dist
FUZZTIME ?= 10s

.PHONY: test lint unit fuzz cross dist clean

test: lint unit fuzz cross

# Formatting and vet problems fail the suite.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every package under the race detector; each package's fuzz targets run
# their seed corpus here. The browser test is left out of the race build
# (chromedp races internally) and runs on its own.
unit:
	$(GO) test -race -count=1 -timeout 8m ./...
	$(GO) test -count=1 -run '^TestBrowser' ./bridge/daemon

# Each fuzz target runs briefly with coverage guidance.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRouterMatch$$' -fuzztime $(FUZZTIME) ./bridge/api
	$(GO) test -run '^$$' -fuzz '^FuzzParseAuthorizeRequest$$' -fuzztime $(FUZZTIME) ./bridge/oauth
	$(GO) test -run '^$$' -fuzz '^FuzzParsers$$' -fuzztime $(FUZZTIME) ./drivers/mqtt

# The cross-compiled targets must build.
cross:
	GO=$(GO) ./.ci/cross-build $$(mktemp -d)

dist:
	GO=$(GO) ./.ci/cross-build $(DIST)

clean:
	rm -rf $(DIST)
