// Package version says which build of switchbridge is running: its
// version, the commit it was built from and the Go release that built it.
// The CLI's version command, the start-up log line, the
// switchbridge_build_info metric and the version a hub reports to its
// platform all read it here, so they cannot disagree.
//
// The version comes, in order, from the linker (make dist and make
// package set it, and the commit, with -ldflags "-X
// …/bridge/version.version=v1.2.3 -X …/bridge/version.commit=…", from
// .ci/version, because the go command records nothing of a git worktree
// or under GOFLAGS=-buildvcs=false),
// from the module version the go command stamps into a build (a tagged
// `go install …@v1.2.3`, or since Go 1.24 a `go build` in a git checkout:
// the tag, or a pseudo-version such as v0.0.0-20261125141503-2e0fa4e1234a
// for an untagged commit, with +dirty for uncommitted changes), and else
// from the commit the build records (vcs.revision and vcs.time) as a
// pseudo-version of the same shape. It is never "(devel)": a binary with
// no record of where it came from (go test, -buildvcs=false outside a
// module release) says v0.0.0-unknown.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// version and commit may be set by the linker; see the package comment.
var version, commit string

// Unknown is the version of a build that records neither a version nor a
// commit.
const Unknown = "v0.0.0-unknown"

// Info is one build's identity.
type Info struct {
	// Version is a Go module version: v1.2.3, or a pseudo-version.
	Version string
	// Commit is the full commit hash, with "-dirty" when the build had
	// uncommitted changes; "" when the build did not record it.
	Commit string
	// Go is the Go release that built the binary (runtime.Version).
	Go string
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	i := from(version, bi)
	if commit != "" {
		i.Commit = commit
	}
	return i
}

// Version is Get().Version.
func Version() string { return Get().Version }

// String is the one line the version command prints and the start-up log
// carries: "v1.2.3 (commit 2e0fa4e1234a…, go1.26.8)".
func (i Info) String() string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown"
	}
	return i.Version + " (commit " + commit + ", " + i.Go + ")"
}

// from works out the Info from a linker-set version (or "") and the
// build information (or nil).
func from(linked string, bi *debug.BuildInfo) Info {
	info := Info{Version: linked, Go: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = Unknown
		}
		return info
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	var rev, when string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		info.Commit = rev
		if modified {
			info.Commit += "-dirty"
		}
	}
	if info.Version == "" {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
	}
	if info.Version == "" {
		info.Version = pseudo(rev, when, modified)
	}
	return info
}

// pseudo makes a Go pseudo-version (v0.0.0-yyyymmddhhmmss-abcdefabcdef)
// from a commit and its time, as the go command names an untagged commit.
func pseudo(rev, when string, modified bool) string {
	if len(rev) < 12 {
		return Unknown
	}
	stamp := "00000000000000"
	if t, err := time.Parse(time.RFC3339, when); err == nil {
		stamp = t.UTC().Format("20060102150405")
	}
	v := "v0.0.0-" + stamp + "-" + strings.ToLower(rev[:12])
	if modified {
		v += "+dirty"
	}
	return v
}
