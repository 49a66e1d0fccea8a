package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tbRecorder notes whether a helper skipped or failed the test, and stops
// the goroutine as testing.T does.
type tbRecorder struct {
	testing.TB
	skipped, failed string
}

func (r *tbRecorder) Helper() {}

func (r *tbRecorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *tbRecorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// Without PostgreSQL a test is skipped on a developer's machine and fails
// under CI, where the missing package is the machine's fault.
func TestUnavailableSkipsOrFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci                 string
		wantSkip, wantFail bool
	}{
		{ci: "", wantSkip: true},
		{ci: "false", wantSkip: true},
		{ci: "true", wantFail: true},
	} {
		t.Setenv("CI", tc.ci)
		r := &tbRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			unavailable(r, errors.New("initdb is nowhere"))
		}()
		<-done
		if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
			t.Errorf("CI=%q: skipped %q, failed %q", tc.ci, r.skipped, r.failed)
		}
		if msg := r.skipped + r.failed; !strings.Contains(msg, "initdb is nowhere") || !strings.Contains(msg, "apt-get install postgresql") {
			t.Errorf("CI=%q: the message %q does not give the reason and the remedy", tc.ci, msg)
		}
	}
}

// The highest installed version is tried first, by number, not by text
// ("9.6" sorts after "15" as text).
func TestDebianDirectoriesHighestVersionFirst(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/13/bin", "/usr/lib/postgresql/16/bin"}
	newestFirst(dirs)
	want := []string{"/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/13/bin", "/usr/lib/postgresql/9.6/bin"}
	if !slices.Equal(dirs, want) {
		t.Errorf("order %v, want %v", dirs, want)
	}
}

// Only the directories of test binaries that are gone, and whose server
// has exited, are removed; one being set up (no owner file yet) is not.
func TestSweepRemovesOnlyAbandonedDirectories(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead, live := strconv.Itoa(gone.Process.Pid), strconv.Itoa(os.Getpid())

	parent := t.TempDir()
	mkdir := func(name, owner, postmaster string) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if postmaster != "" {
			if err := os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte(postmaster+"\n/some/data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	abandoned := mkdir(dirPrefix+"abandoned", dead, dead)
	inUse := mkdir(dirPrefix+"in-use", live, live)
	serverLeft := mkdir(dirPrefix+"server-left", dead, live)
	settingUp := mkdir(dirPrefix+"setting-up", "", "")
	unrelated := mkdir("unrelated", dead, "")

	sweepStale(parent)

	for dir, want := range map[string]bool{abandoned: false, inUse: true, serverLeft: true, settingUp: true, unrelated: true} {
		_, err := os.Stat(dir)
		if exists := err == nil; exists != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(dir), exists, want)
		}
	}
}

// A process that has exited but was not reaped is not alive.
func TestZombieIsNotAlive(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	if !alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	// Not waited for, true becomes a zombie once it exits.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d, exited and not reaped, still counts as alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The template cache keeps the template in use and those used lately,
// and drops templates unused for a week and copies left half made.
func TestPruneTemplates(t *testing.T) {
	parent := t.TempDir()
	now := time.Now()
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(p, "global"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	current := mk("15.20-aaaa", 30*24*time.Hour) // made long ago, in use now
	recent := mk("16.4-bbbb", 24*time.Hour)
	old := mk("14.9-cccc", 8*24*time.Hour)
	leftover := mk(".staging-123", 2*time.Hour)
	saving := mk(".staging-456", time.Minute)
	pruneTemplates(current, now)
	for path, kept := range map[string]bool{current: true, recent: true, old: false, leftover: false, saving: true} {
		_, err := os.Stat(path)
		if kept != (err == nil) {
			t.Errorf("%s: kept %v, want %v", filepath.Base(path), err == nil, kept)
		}
	}
	if st, err := os.Stat(current); err != nil || now.Sub(st.ModTime()) > time.Minute {
		t.Errorf("the template in use is not marked used: %v", err)
	}
}
