package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve's log lines reach stderr through the log buffer, without anyone
// flushing, and its drop counter is exported.
func TestServeLogsThroughItsBuffer(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `metrics_listen: "off"`, "metrics_listen: 127.0.0.1:0", 1)), 0o600)
	// Ports the kernel picks as the daemon binds: a watched start is not
	// started again (see listenOnAnyPort).
	listenOnAnyPort(t, cfg)
	w := startWatched(t, cfg)
	defer func() {
		w.cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
	}()
	w.wait(t, "switchbridge ready", 20*time.Second)
	addr, metrics, ok := readyAddrs(w.text())
	if !ok {
		t.Fatalf("no addresses in the ready line:\n%s", w.text())
	}

	// A request's line is written while the daemon idles afterwards.
	resp, err := http.Get("http://" + addr + "/api/apps/installations/nope/switches")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	w.wait(t, "status=401", 5*time.Second)

	resp, err = http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nswitchbridge_log_lines_dropped_total 0\n") {
		t.Errorf("no switchbridge_log_lines_dropped_total 0 in the metrics:\n%s", body)
	}
}
