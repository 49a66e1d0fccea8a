# make dist: switchbridge for every hub target (linux arm64, armv7, armv6
# and amd64), statically linked without cgo, in dist/. The target list
# lives in .ci/cross-build, which CI runs too.

GO ?= go
DIST ?= dist

.PHONY: dist clean

dist:
	GO=$(GO) ./.ci/cross-build $(DIST)

clean:
	rm -rf $(DIST)
