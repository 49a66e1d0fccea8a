package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// mqtt client-ids lists the broker's bindings; mqtt release-client-id
// frees one, and says so when there is none to free.
func TestMQTTReleaseClientID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	db, err := store.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for id, login := range map[string]string{"DVES_1A2B3C": "kitchen", "shelly1-1": "hall"} {
		if _, err := hubstore.New(db).BindMQTTClientID(ctx, id, login, at, false, 10); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	r := runCLI(t, "", "mqtt", "client-ids", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "DVES_1A2B3C  kitchen  2026-01-02T03:04:05Z") || !strings.Contains(r.stdout, "shelly1-1    hall") {
		t.Fatalf("mqtt client-ids: %+v", r)
	}
	if r := runCLI(t, "", "mqtt", "release-client-id", "DVES_1A2B3C", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "released client id DVES_1A2B3C (it was login kitchen's)") {
		t.Errorf("mqtt release-client-id: %+v", r)
	}
	if r := runCLI(t, "", "mqtt", "client-ids", "--config", cfg); strings.Contains(r.stdout, "DVES_1A2B3C") || !strings.Contains(r.stdout, "shelly1-1") {
		t.Errorf("after the release: %+v", r)
	}
	if r := runCLI(t, "", "mqtt", "release-client-id", "DVES_1A2B3C", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, `client id "DVES_1A2B3C" is bound to no login`) {
		t.Errorf("releasing it again: %+v", r)
	}
	if r := runCLI(t, "", "mqtt", "release-client-id", "--config", cfg); r.code != 2 {
		t.Errorf("without an id: %+v", r)
	}
}
