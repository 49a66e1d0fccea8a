// Package deb holds the Debian package of the hub: nfpm's description
// (nfpm.yaml), the maintainer scripts, the copyright file and lintian's
// overrides, with tests that build the packages (.ci/package) and check
// them with Debian's own tools: dpkg-deb, lintian, and an install,
// upgrade, remove and purge in a Debian bookworm chroot made by
// mmdebstrap (make deb). It has no Go code to import.
package deb
