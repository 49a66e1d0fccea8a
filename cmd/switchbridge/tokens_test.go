package main

import (
	"context"
	"encoding/json"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestAppLegacyAndLifetimeCommands: app create --legacy and
// --access-token-lifetime, app legacy, app access-token-lifetime, and the
// lifetime reaching the tokens issued.
func TestAppLegacyAndLifetimeCommands(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	if r := runCLI(t, "secret-pw\n", "user", "add", "alice", "--location", "1", "--config", cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	r := runCLI(t, "", "app", "create", "--name", "Old", "--redirect-uri", "https://x/cb", "--owner", "alice",
		"--legacy", "--access-token-lifetime", "1h", "--json", "--config", cfg)
	var app struct {
		ID string `json:"client_id"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &app) != nil || app.ID == "" {
		t.Fatalf("app create --legacy --access-token-lifetime 1h: %+v", r)
	}
	readApp := func() (bool, time.Duration) {
		t.Helper()
		db, err := store.Open(context.Background(), filepath.Join(dir, "data"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		a, err := accounts.New(db).App(context.Background(), app.ID)
		if err != nil {
			t.Fatal(err)
		}
		return a.Legacy, a.AccessTokenLifetime
	}
	if legacy, life := readApp(); !legacy || life != time.Hour {
		t.Errorf("created app: legacy %v, lifetime %s", legacy, life)
	}
	if r := runCLI(t, "", "app", "list", "--config", cfg); !strings.Contains(r.stdout, "LEGACY") || !strings.Contains(r.stdout, "1h0m0s") {
		t.Errorf("app list = %q", r.stdout)
	}

	// install issues a token with the app's lifetime, not the hub's 90 days.
	r = runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--json", "--config", cfg)
	var inst struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inst) != nil {
		t.Fatalf("install: %+v", r)
	}
	if left := time.Until(inst.ExpiresAt); left > time.Hour || left < 50*time.Minute {
		t.Errorf("install token expires in %s, want the app's 1h", left)
	}

	steps := []struct {
		args   []string
		code   int
		output string
	}{
		{[]string{"app", "legacy", app.ID, "off"}, 0, "legacy off"},
		{[]string{"app", "access-token-lifetime", app.ID, "90s"}, 0, "live 1m30s"},
		{[]string{"app", "legacy", app.ID}, 2, "on or off"},
		{[]string{"app", "legacy", app.ID, "yes"}, 2, "on or off"},
		{[]string{"app", "legacy", "nope", "on"}, 1, "nope"},
		{[]string{"app", "access-token-lifetime", app.ID, "500ms"}, 2, "at least 1s"},
		{[]string{"app", "access-token-lifetime", app.ID, "soon"}, 2, "not a lifetime"},
		{[]string{"app", "access-token-lifetime", "nope", "1h"}, 1, "nope"},
		{[]string{"app", "create", "--name", "X", "--redirect-uri", "https://x/cb", "--owner", "alice", "--access-token-lifetime", "0s"}, 2, "at least 1s"},
	}
	for _, s := range steps {
		r := runCLI(t, "", append(s.args, "--config", cfg)...)
		where := r.stdout
		if s.code != 0 {
			where = r.stderr
		}
		if r.code != s.code || !strings.Contains(where, s.output) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", s.args, r.code, r.stdout, r.stderr, s.code, s.output)
		}
	}
	if legacy, life := readApp(); legacy || life != 90*time.Second {
		t.Errorf("after the changes: legacy %v, lifetime %s", legacy, life)
	}
	if r := runCLI(t, "", "app", "legacy", app.ID, "on", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "query string") {
		t.Errorf("app legacy on must warn: %+v", r)
	}
	if r := runCLI(t, "", "app", "access-token-lifetime", app.ID, "default", "--config", cfg); r.code != 0 {
		t.Errorf("back to the default: %+v", r)
	}
	if legacy, life := readApp(); !legacy || life != 0 {
		t.Errorf("after legacy on and the default lifetime: legacy %v, lifetime %s", legacy, life)
	}
}
