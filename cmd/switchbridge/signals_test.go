package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logWatcher is a daemon process whose log lines the test reads as they
// come.
type logWatcher struct {
	cmd     *exec.Cmd
	started time.Time // when exec returned
	mu      sync.Mutex
	log     []string
	at      []time.Time
	more    chan struct{} // pulsed on every new line
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, once done is closed
}

func startWatched(t *testing.T, cfg string) *logWatcher {
	t.Helper()
	skipIfEmulated(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startWatchedExe(t, exe, cfg)
}

// startWatchedExe runs exe serve: this test binary (startWatched), or a
// switchbridge binary built by the test, with env added to the
// environment. It returns at once, for a test that acts at set times
// after exec, so it cannot start the daemon again on other ports as
// startServe does: the configs it runs listen on ports the kernel picks
// at bind time (listenOnAnyPort), which no other process can take first.
func startWatchedExe(t *testing.T, exe, cfg string, env ...string) *logWatcher {
	t.Helper()
	w := &logWatcher{more: make(chan struct{}, 1), done: make(chan struct{})}
	w.cmd = exec.Command(exe, "serve", "--config", cfg)
	// No GOMEMLIMIT from the environment: the config's limit applies.
	w.cmd.Env = append(append(os.Environ(), "SWITCHBRIDGE_RUN_MAIN=1", "GOMEMLIMIT="), env...)
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.started = time.Now()
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.mu.Lock()
			w.log = append(w.log, sc.Text())
			w.at = append(w.at, time.Now())
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

// wait returns when a line containing s has been logged, with the time the
// test read it.
func (w *logWatcher) wait(t *testing.T, s string, within time.Duration) time.Time {
	t.Helper()
	at, ok := w.waitOrExit(t, s, within)
	if !ok {
		t.Fatalf("the daemon exited (%v) before logging %q:\n%s", w.err, s, w.text())
	}
	return at
}

// waitOrExit is wait, but returns false if the daemon exits first.
func (w *logWatcher) waitOrExit(t *testing.T, s string, within time.Duration) (time.Time, bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		w.mu.Lock()
		for i, l := range w.log {
			if strings.Contains(l, s) {
				at := w.at[i]
				w.mu.Unlock()
				return at, true
			}
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-w.done:
			// Lines read before the exit are in w.log already: the
			// reader ends before done is closed.
			if strings.Contains(w.text(), s) {
				continue
			}
			return time.Time{}, false
		case <-deadline:
			t.Fatalf("no %q within %s:\n%s", s, within, w.text())
		}
	}
}

func (w *logWatcher) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.log, "\n")
}

func (w *logWatcher) count(s string) int {
	return strings.Count(w.text(), s)
}

var startupReloadRE = regexp.MustCompile(`msg="reload asked for during start-up: reloading now" requests=(\d+)`)

// TestSIGHUPDuringStartup sends bursts of SIGHUP to a real daemon at many
// points of its start-up, from the moment it logs "starting" (signal
// handling is installed before the config is even read) to past "ready".
// The daemon must never die of it: it becomes ready, applies the reload
// once ready (requests made before then coalesce into one reload, which it
// logs), and still exits 0 on SIGTERM.
func TestSIGHUPDuringStartup(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	listenOnAnyPort(t, cfg)

	// How long start-up takes here, from "starting" to "ready", once the
	// database exists (the first start creates it).
	var startup time.Duration
	for range 2 {
		w := startWatched(t, cfg)
		started := w.wait(t, "switchbridge starting", 20*time.Second)
		w.wait(t, "memory_limit=128MiB memory_limit_from=server.memory_limit", time.Second)
		startup = w.wait(t, "switchbridge ready", 20*time.Second).Sub(started)
		w.cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
	}
	t.Logf("start-up takes %s", startup)

	const runs = 10 // delays 0, 1/6, 2/6 ... of start-up, up to 1.5 times it
	const burst = 3
	beforeReady := 0
	for i := 0; i < runs; i++ {
		delay := startup * time.Duration(i) / 6
		w := startWatched(t, cfg)
		w.wait(t, "switchbridge starting", 20*time.Second)
		time.Sleep(delay)
		for j := 0; j < burst; j++ {
			if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatalf("run %d (SIGHUP %s after starting): %v\n%s", i, delay, err, w.text())
			}
		}
		w.wait(t, "switchbridge ready", 20*time.Second)
		w.wait(t, "reloaded switches and locations", 10*time.Second)
		// Room for a second reload, should the burst have straddled ready.
		time.Sleep(300 * time.Millisecond)
		select {
		case <-w.done:
			t.Fatalf("run %d: the daemon died after SIGHUP %s into start-up: %v\n%s", i, delay, w.err, w.text())
		default:
		}
		reloads := w.count("reloaded switches and locations")
		if reloads < 1 || reloads > burst {
			t.Errorf("run %d: %d reloads for %d SIGHUPs:\n%s", i, reloads, burst, w.text())
		}
		if m := startupReloadRE.FindStringSubmatch(w.text()); m != nil {
			beforeReady++
			// Every request of the burst came before ready: they are
			// one reload, logged as such, after ready.
			if n, _ := strconv.Atoi(m[1]); n == burst && reloads != 1 {
				t.Errorf("run %d: %d SIGHUPs during start-up gave %d reloads, want 1:\n%s", i, burst, reloads, w.text())
			}
			log := w.text()
			if strings.Index(log, "switchbridge ready") > strings.Index(log, "reload asked for during start-up") {
				t.Errorf("run %d: the start-up reload came before ready:\n%s", i, log)
			}
		}
		w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("run %d: no exit after SIGTERM:\n%s", i, w.text())
		}
		if w.err != nil {
			t.Errorf("run %d: exit %v after SIGTERM, want 0:\n%s", i, w.err, w.text())
		}
	}
	// The early delays must have hit start-up, or this test proved nothing.
	if beforeReady == 0 {
		t.Errorf("no run sent SIGHUP before ready (start-up took %s)", startup)
	}
	t.Logf("%d of %d runs signalled before ready", beforeReady, runs)
}

var beforeMainRE = regexp.MustCompile(`before_main=(\d+)`)

// earlysigPath is the package that catches SIGHUP before main.
const earlysigPath = "github.com/switchbridge/switchbridge/cmd/switchbridge/internal/earlysig"

// TestSIGHUPRightAfterExec sends one SIGHUP to a real daemon 1, 2, 4, 8
// and 16 ms after exec, ten times each: in the first milliseconds, before
// main runs, while the packages the daemon is made of initialise. Go's
// default for SIGHUP is to exit, and systemd counts that as a clean exit,
// so the hub stayed down. The daemon must survive, become ready, apply the
// reload once ready, and exit 0 on SIGTERM; and some of the earliest
// signals must be the ones caught before main, or the test proved nothing.
//
// One death is not the daemon's to prevent: a SIGHUP that arrives while
// the Go runtime itself starts, before it has initialised the few packages
// earlysig needs (os/signal and what it imports), meets no code of the
// program (measured on a two-core x86 test machine: earlysig's init
// comes 1.2 ms after exec at the median, where a Go program that does
// nothing but that takes 0.7 ms; several ms under load; systemd restarts
// the unit after such a death, see RestartForceExitStatus). The daemons run with GODEBUG=inittrace=1, which
// prints each package's initialisation as it completes, so a death tells
// how far start-up had gone: past any package beyond those, it fails the
// test; within them, it is counted and logged.
//
// The daemon is built here as the release is (.ci/cross-build: no cgo,
// stripped), not this test binary: under the race detector the runtime
// alone takes several milliseconds to start, which a hub never runs.
func TestSIGHUPRightAfterExec(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and starts it 50 times")
	}
	skipIfEmulated(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "switchbridge")
	goBuild(t, exe, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
	cfg, _ := writeConfig(t, dir)
	listenOnAnyPort(t, cfg)
	// The first start creates the database; the others open it. It also
	// tells which packages the runtime initialises before earlysig.
	w := startWatchedExe(t, exe, cfg, "GODEBUG=inittrace=1")
	w.wait(t, "switchbridge ready", 20*time.Second)
	w.cmd.Process.Signal(syscall.SIGTERM)
	<-w.done
	runtimeOnly := map[string]bool{}
	for _, m := range initTraceRE.FindAllStringSubmatch(w.text(), -1) {
		if m[1] == earlysigPath {
			break
		}
		runtimeOnly[m[1]] = true
	}
	if !strings.Contains(w.text(), "init "+earlysigPath+" @") {
		t.Fatalf("%s is not initialised:\n%s", earlysigPath, w.text())
	}

	const tries = 10
	beforeMain := 0
	for _, delay := range []time.Duration{1, 2, 4, 8, 16} {
		delay *= time.Millisecond
		t.Run(delay.String(), func(t *testing.T) {
			runtimeDeaths, early := 0, 0 // early: runs whose SIGHUP came before main
			defer func() { beforeMain += early }()
			for range tries {
				w := startWatchedExe(t, exe, cfg, "GODEBUG=inittrace=1")
				time.Sleep(time.Until(w.started.Add(delay)))
				if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatalf("SIGHUP: %v\n%s", err, w.text())
				}
				if _, ok := w.waitOrExit(t, "switchbridge ready", 20*time.Second); !ok {
					var last string
					for _, m := range initTraceRE.FindAllStringSubmatch(w.text(), -1) {
						last = m[1]
						if !runtimeOnly[m[1]] {
							t.Fatalf("SIGHUP %s after exec ended the daemon (%v) after %s was initialised:\n%s", delay, w.err, m[1], w.text())
						}
					}
					runtimeDeaths++
					t.Logf("SIGHUP %s after exec came while the runtime started (last package initialised: %q) and ended it (%v)", delay, last, w.err)
					continue
				}
				w.wait(t, "reloaded switches and locations", 10*time.Second)
				if m := beforeMainRE.FindStringSubmatch(w.text()); m != nil && m[1] != "0" {
					early++
				}
				w.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-w.done:
				case <-time.After(15 * time.Second):
					t.Fatalf("no exit after SIGTERM:\n%s", w.text())
				}
				if w.err != nil {
					t.Errorf("exit %v after SIGTERM, want 0:\n%s", w.err, w.text())
				}
				if c := w.count("reloaded switches and locations"); c != 1 {
					t.Errorf("%d reloads for one SIGHUP, want 1:\n%s", c, w.text())
				}
			}
			t.Logf("SIGHUP %s after exec, %d runs: %d caught before main, %d ended while the runtime started", delay, tries, early, runtimeDeaths)
		})
	}
	if beforeMain == 0 {
		t.Error("no SIGHUP came before main: the test did not reach the first milliseconds")
	}
}

var initTraceRE = regexp.MustCompile(`(?m)^init (\S+) @`)

// lightInits are the packages outside the standard library that may
// initialise before earlysig: they import only sync, context and time, so
// they are ready before os/signal is, and their path sorts first, and
// their init only sets up a few sync.Pools and variables (microseconds in
// the trace, no I/O).
var lightInits = map[string]bool{
	"github.com/jackc/pgx/v5/internal/iobufpool": true,
	"github.com/jackc/puddle/v2":                 true,
}

// TestEarlySignalInit checks, on the real process, what package earlysig
// relies on: its init runs before that of any package outside the
// standard library, so SIGHUP is caught before the heavy packages (the
// database, TLS, metrics, MQTT) initialise. An import added to earlysig,
// or a package that sorts before it and is ready as early, would move it.
func TestEarlySignalInit(t *testing.T) {
	skipIfEmulated(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "help")
	cmd.Env = append(os.Environ(), "SWITCHBRIDGE_RUN_MAIN=1", "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	const early = earlysigPath
	var before []string
	for _, m := range initTraceRE.FindAllStringSubmatch(string(out), -1) {
		if m[1] == early {
			t.Logf("initialised after %d packages: %s", len(before), strings.Join(before, " "))
			return
		}
		if first, _, _ := strings.Cut(m[1], "/"); strings.Contains(first, ".") && !lightInits[m[1]] {
			t.Errorf("%s initialises before earlysig", m[1])
		}
		before = append(before, m[1])
	}
	t.Fatalf("no init of %s in the trace:\n%s", early, out)
}
