package main

import (
	"context"
	"encoding/json"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// callRID makes one API request with a bearer token and returns its
// status and X-Request-Id.
func callRID(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rid := resp.Header.Get("X-Request-Id")
	if rid == "" {
		t.Fatalf("%s %s: no X-Request-Id", method, url)
	}
	return resp.StatusCode, rid
}

// auditRow is one line of audit's table, by column.
type auditRow struct{ at, installation, app, user, sw, command, outcome, latency, rid string }

// auditRows parses audit's table: its header, then one row per record
// (TIME is a date and a time).
func auditRows(t *testing.T, out string) []auditRow {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "TIME INSTALLATION APP USER SWITCH COMMAND OUTCOME LATENCY REQUEST_ID" {
		t.Fatalf("audit's header: %q", lines[0])
	}
	var rows []auditRow
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 10 {
			t.Fatalf("audit row %q has %d columns, want 10", l, len(f))
		}
		rows = append(rows, auditRow{f[0] + " " + f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]})
	}
	return rows
}

// TestAuditCommand: the records of a hub's commands survive kill -9 (the
// journal they were written to is folded at the next start), and audit
// prints them as a table and as JSON, newest first, filtered by
// installation, switch, age and count, each under the X-Request-Id the
// app was answered with. On a platform, audit says which hubs keep the
// logs it does not have.
func TestAuditCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills daemon processes (seconds)")
	}
	skipIfEmulated(t)
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	body, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(body), "{id: fan, name: Fan, driver: virtual}", "{id: fan, name: Fan, driver: virtual, fail: true}", 1)), 0o600)
	app := addDeveloperApp(t, cfg, "1")
	p := startDaemon(t, cfg)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--switch", "fan", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}
	installation := inst.Endpoint[strings.LastIndex(inst.Endpoint, "/")+1:]
	code, ridLamp := callRID(t, http.MethodPut, inst.Endpoint+"/switches/lamp/on", inst.Token)
	if code != http.StatusNoContent {
		t.Fatalf("PUT lamp on = %d", code)
	}
	code, ridFan := callRID(t, http.MethodPut, inst.Endpoint+"/switches/fan/on", inst.Token)
	if code != http.StatusBadGateway {
		t.Fatalf("PUT fan on = %d, want 502", code)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	journal, _ := os.ReadFile(filepath.Join(dir, "data", store.JournalName))
	inJournal := strings.Contains(string(journal), ridFan)
	if inJournal {
		t.Log("killed with the fan's record in the journal alone")
	} else {
		t.Log("killed after the records were stored")
	}

	p = startDaemon(t, cfg)
	if inJournal && !strings.Contains(p.stderr.String(), "recovered audit records from the journal") {
		t.Errorf("the restart does not say it recovered the journal's audit records:\n%s", p.stderr.String())
	}
	r = runCLI(t, "", "audit", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("audit: %+v", r)
	}
	rows := auditRows(t, r.stdout)
	if len(rows) != 2 {
		t.Fatalf("audit after kill -9 and restart:\n%s\nwant the two commands' records", r.stdout)
	}
	want := []auditRow{
		{installation: installation, app: "A", user: "alice", sw: "fan", command: "on", outcome: "failed", rid: ridFan},
		{installation: installation, app: "A", user: "alice", sw: "lamp", command: "on", outcome: "ok", latency: "<1ms", rid: ridLamp},
	}
	for i, w := range want {
		g := rows[i]
		if w.latency == "" {
			w.latency = g.latency
		}
		w.at = g.at
		if g != w {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
		if at, err := time.ParseInLocation(auditTime, g.at, time.Local); err != nil || time.Since(at) > time.Hour || time.Since(at) < -time.Minute {
			t.Errorf("row %d: time %q, want the command's", i, g.at)
		}
	}

	r = runCLI(t, "", "audit", "--json", "--config", cfg)
	var recs []auditJSON
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("audit --json: %v\n%+v", err, r)
	}
	lamp := recs[1]
	if at, err := time.Parse(time.RFC3339Nano, lamp.At); err != nil || lamp.InstallationID != installation || lamp.ClientID != app.ID || lamp.App != "A" ||
		lamp.User != "alice" || lamp.UserID == 0 || lamp.SwitchID != "lamp" || lamp.Command != "on" || lamp.Outcome != "ok" || lamp.RequestID != ridLamp || time.Since(at) > time.Hour {
		t.Errorf("audit --json's lamp record: %+v", lamp)
	}
	if recs[0].RequestID != ridFan || recs[0].Outcome != "failed" {
		t.Errorf("audit --json's newest record: %+v, want the fan's failure", recs[0])
	}

	// Filters.
	for _, c := range []struct {
		args []string
		rids []string
	}{
		{[]string{"--switch", "lamp"}, []string{ridLamp}},
		{[]string{"--installation", installation, "--since", "1h"}, []string{ridFan, ridLamp}},
		{[]string{"--limit", "1"}, []string{ridFan}},
		{[]string{"--app", app.ID, "--switch", "fan"}, []string{ridFan}},
	} {
		r := runCLI(t, "", append([]string{"audit", "--config", cfg}, c.args...)...)
		var got []string
		for _, row := range auditRows(t, r.stdout) {
			got = append(got, row.rid)
		}
		if r.code != 0 || strings.Join(got, " ") != strings.Join(c.rids, " ") {
			t.Errorf("audit %v: %+v, want the records of %v", c.args, r, c.rids)
		}
	}
	if r := runCLI(t, "", "audit", "--limit", "1", "--config", cfg); !strings.Contains(r.stderr, "the 1 newest records; --limit N shows more") {
		t.Errorf("audit --limit 1 does not say more records may be there: %q", r.stderr)
	}
	if r := runCLI(t, "", "audit", "--installation", "nope", "--config", cfg); r.code != 0 || strings.TrimSpace(r.stdout) != "no commands recorded for installation nope" {
		t.Errorf("audit of an unknown installation: %+v", r)
	}
	if r := runCLI(t, "", "audit", "--app", "another-app", "--config", cfg); r.code != 0 || strings.TrimSpace(r.stdout) != "no commands recorded for app another-app" {
		t.Errorf("audit of another app: %+v", r)
	}
	if r := runCLI(t, "", "audit", "--since", "yesterday", "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, "not a duration of the past") {
		t.Errorf("audit --since yesterday: %+v", r)
	}

	// A platform with a hub: the hub's installations are audited there.
	if r := runCLI(t, "", "hub", "add", "garden", "--base-url", "http://garden.example", "--config", cfg); r.code != 0 {
		t.Fatalf("hub add: %+v", r)
	}
	r = runCLI(t, "", "audit", "--json", "--config", cfg)
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 2 ||
		!strings.Contains(r.stderr, "each hub keeps the log of the installations in its locations: run switchbridge audit on the hub: garden (http://garden.example)") {
		t.Errorf("audit on a platform with a hub: %+v", r)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	hubs, err := accounts.New(db).Hubs(ctx)
	if err != nil || len(hubs) != 1 {
		t.Fatalf("hubs %v, %v", hubs, err)
	}
	err = accounts.New(db).SetInventory(ctx, hubs[0].ID, "test", []bridge.RemoteLocation{{ID: 7, Name: "Garden", Switches: []bridge.RemoteSwitch{{ID: "pond", Name: "Pond pump", Commands: []bridge.Command{bridge.CommandOn, bridge.CommandOff}}}}},
		func(int64) bool { return false })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "user", "locations", "alice", "--add", "7", "--config", cfg); r.code != 0 {
		t.Fatalf("user locations: %+v", r)
	}
	r = runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "7", "--switch", "pond", "--json", "--config", cfg)
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install at the hub: %+v", r)
	}
	remote := inst.Endpoint[strings.LastIndex(inst.Endpoint, "/")+1:]
	if r := runCLI(t, "", "audit", "--installation", remote, "--config", cfg); r.code != 1 ||
		!strings.Contains(r.stderr, "installation "+remote+" is in a location of hub garden (http://garden.example), which keeps its audit log: run switchbridge audit there") {
		t.Errorf("audit of an installation a hub serves: %+v", r)
	}
}

// TestAuditOnAPlatformWithoutSwitches: a platform on PostgreSQL has no
// switches, so no log of its own: audit says to ask the hubs.
func TestAuditOnAPlatformWithoutSwitches(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	cfg, _ := writePostgresConfig(t, dir, dsn)
	r := runCLI(t, "", "audit", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "this platform has no switches of its own: each hub keeps the audit log of the commands its installations sent; run switchbridge audit on the hub (no hub is registered yet") {
		t.Errorf("audit on a platform without hubs: %+v", r)
	}
	if r := runCLI(t, "", "hub", "add", "garden", "--base-url", "http://garden.example", "--config", cfg); r.code != 0 {
		t.Fatalf("hub add: %+v", r)
	}
	r = runCLI(t, "", "audit", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "run switchbridge audit on the hub: garden (http://garden.example)") {
		t.Errorf("audit on a platform with a hub: %+v", r)
	}
}
