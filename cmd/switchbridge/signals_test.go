package main

import (
	"bufio"
	"os"
	"os/exec"
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
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []string
	at   []time.Time
	more chan struct{} // pulsed on every new line
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

func startWatched(t *testing.T, cfg string) *logWatcher {
	t.Helper()
	skipIfEmulated(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := &logWatcher{more: make(chan struct{}, 1), done: make(chan struct{})}
	w.cmd = exec.Command(exe, "serve", "--config", cfg)
	// No GOMEMLIMIT from the environment: the config's limit applies.
	w.cmd.Env = append(os.Environ(), "SWITCHBRIDGE_RUN_MAIN=1", "GOMEMLIMIT=")
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	deadline := time.After(within)
	for {
		w.mu.Lock()
		for i, l := range w.log {
			if strings.Contains(l, s) {
				at := w.at[i]
				w.mu.Unlock()
				return at
			}
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-w.done:
			t.Fatalf("the daemon exited (%v) before logging %q:\n%s", w.err, s, w.text())
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
