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
	cfg, addr := writeConfig(t, dir)
	metrics := freePort(t)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `metrics_listen: "off"`, "metrics_listen: "+metrics, 1)), 0o600)
	w := startWatched(t, cfg)
	defer func() {
		w.cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
	}()
	w.wait(t, "switchbridge ready", 20*time.Second)

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
