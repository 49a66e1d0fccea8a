package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func settings(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

func TestFrom(t *testing.T) {
	const rev = "2e0fa4e1234a5678901234567890123456789012"
	for _, tc := range []struct {
		name         string
		linked       string
		bi           *debug.BuildInfo
		want, commit string
	}{
		{"no build info", "", nil, Unknown, ""},
		{"linker wins", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}, Settings: settings("vcs.revision", rev)}, "v1.2.3", rev},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.0.0", ""},
		{"stamped pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125141503-2e0fa4e1234a+dirty"},
			Settings: settings("vcs.revision", rev, "vcs.modified", "true")}, "v0.0.0-20261125141503-2e0fa4e1234a+dirty", rev + "-dirty"},
		// An older go command, or a build that stamps the commit but not
		// the version, is named from the commit.
		{"devel with commit", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-25T15:15:03+01:00")}, "v0.0.0-20261125141503-2e0fa4e1234a", rev},
		{"devel with changes", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-25T14:15:03Z", "vcs.modified", "true")}, "v0.0.0-20261125141503-2e0fa4e1234a+dirty", rev + "-dirty"},
		{"devel without commit", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Unknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := from(tc.linked, tc.bi)
			if got.Version != tc.want || got.Commit != tc.commit {
				t.Errorf("version %q commit %q, want %q and %q", got.Version, got.Commit, tc.want, tc.commit)
			}
			if got.Go == "" {
				t.Error("no Go version")
			}
		})
	}
}

// TestGetNeverDevel: a test binary records no version; it must still not
// call itself (devel).
func TestGetNeverDevel(t *testing.T) {
	i := Get()
	if i.Version == "" || strings.Contains(i.Version, "devel") {
		t.Errorf("version %q", i.Version)
	}
	if i.Go != runtime.Version() {
		t.Errorf("Go %q, want %q", i.Go, runtime.Version())
	}
	if s := i.String(); !strings.HasPrefix(s, i.Version+" (commit ") || !strings.Contains(s, i.Go) {
		t.Errorf("String() = %q", s)
	}
}
