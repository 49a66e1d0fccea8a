package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// serveRefuses runs serve as a real process that must exit by itself, and
// returns its exit code and stderr. The configs it runs are refused before
// serve binds a port (their database is damaged, missing or not
// switchbridge's, and serve opens it first), so a port of theirs taken by
// another process cannot be why, and needs no second start.
func serveRefuses(t *testing.T, cfg string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "SWITCHBRIDGE_RUN_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("serve did not refuse within 20 s:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if err == nil {
		return 0, stderr.String()
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode(), stderr.String()
}

// damageFile writes random bytes over pages 2 and 3 of a database file.
func damageFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	garbage := make([]byte, 2*4096)
	rand.Read(garbage)
	if _, err := f.WriteAt(garbage, 4096); err != nil {
		t.Fatal(err)
	}
}

func stopDaemon(t *testing.T, p *daemonProcess) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop after SIGTERM")
	}
}

// TestBackupRestoresADamagedHub takes a backup of a running hub, damages
// its database while it is stopped, checks that serve refuses to start on
// it, restores the backup as the README says, and finds the token, the
// installation and the switch values back.
func TestBackupRestoresADamagedHub(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	data := filepath.Join(dir, "data")
	app := addDeveloperApp(t, cfg, "1")
	p := startDaemon(t, cfg)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--switch", "fan", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", code, body)
	}
	backup := filepath.Join(dir, "backup.db")
	if r := runCLI(t, "", "backup", "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, "backup takes one FILE") {
		t.Errorf("backup without a file: %+v", r)
	}
	if r := runCLI(t, "", "backup", backup, "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "written to "+backup) {
		t.Fatalf("backup while the daemon runs: %+v", r)
	}
	stopDaemon(t, p)

	db := filepath.Join(data, store.FileName)
	damageFile(t, db)
	code, stderr := serveRefuses(t, cfg)
	if code == 0 || !strings.Contains(stderr, "database "+db+" is damaged") || !strings.Contains(stderr, `"Backups and restore" in systemd/README.md`) {
		t.Fatalf("serve on a damaged database: exit %d\n%s", code, stderr)
	}

	// The README's restore: move the damaged database and its WAL files
	// aside, copy the backup in its place; the journal stays.
	aside := filepath.Join(data, "damaged")
	os.Mkdir(aside, 0o700)
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(aside, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}

	startDaemon(t, cfg)
	code, body := call(t, http.MethodGet, inst.Endpoint+"/switches", inst.Token)
	if stripped, n := lastSeenStripped(body); code != http.StatusOK || n != 2 || stripped != `[{"id":"lamp","name":"Lamp","value":"on","available":true},{"id":"fan","name":"Fan","value":"on","available":true}]`+"\n" {
		t.Errorf("after the restore: %d %s, want the token to work and both switches on", code, body)
	}
}

// TestServeRefusesALostDatabase: a first start on an empty directory
// works; after that, an emptied or deleted database is refused rather than
// replaced by a new, empty hub.
func TestServeRefusesALostDatabase(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	data := filepath.Join(dir, "data")
	db := filepath.Join(data, store.FileName)
	p := startDaemon(t, cfg) // the first start, on no data dir at all
	stopDaemon(t, p)
	if p.err != nil {
		t.Fatalf("first start: %v\n%s", p.err, p.stderr)
	}

	if err := os.Truncate(db, 0); err != nil {
		t.Fatal(err)
	}
	code, stderr := serveRefuses(t, cfg)
	if code != 1 || !strings.Contains(stderr, "database "+db+" is empty") || !strings.Contains(stderr, "refusing to start as a new, empty hub") {
		t.Errorf("serve on an emptied database: exit %d\n%s", code, stderr)
	}
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	code, stderr = serveRefuses(t, cfg)
	if code != 1 || !strings.Contains(stderr, "database "+db+" is missing") || !strings.Contains(stderr, "Backups and restore") {
		t.Errorf("serve on a deleted database: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("the refused start created a database")
	}
}
