package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWebhookSurvivesKill9: a change queued for a receiver that is down
// is delivered after the daemon was killed with SIGKILL and started
// again: the outbox is in the database.
func TestWebhookSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	app := addDeveloperApp(t, cfg, "1")
	p := startDaemon(t, cfg)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}

	// A receiver that confirms, then is down (503) until told otherwise.
	hook := startHookReceiver(t)
	hook.register(t, inst.Endpoint, inst.Token)
	hook.setDown(true)
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", code, body)
	}
	// Tried once (so it is in the outbox), then killed.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if hook.refused() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 15 s")
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done

	hook.setDown(false)
	startDaemon(t, cfg)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got := hook.deliveries(); len(got) > 0 {
			if len(got) != 1 || !strings.Contains(got[0], `"id":"lamp"`) || !strings.Contains(got[0], `"value":"on"`) {
				t.Errorf("delivered after kill -9: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued change was not delivered within 30 s of the restart")
		}
	}
	// The owner sees the webhook and its state.
	if r := runCLI(t, "", "installation", "list", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "WEBHOOKS") || !strings.Contains(r.stdout, "1 active") {
		t.Errorf("installation list: %+v", r)
	}
}
