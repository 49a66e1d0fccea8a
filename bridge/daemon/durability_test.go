package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// openWithLogs opens a daemon on dataDir and returns its start-up log.
func openWithLogs(t *testing.T, dataDir string) string {
	t.Helper()
	cfg, err := config.Load("x.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+dataDir+"\n"+hubConfig))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	d, err := daemon.Open(context.Background(), cfg, builtin.Registry(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, logs.String())
	}
	d.Close()
	return logs.String()
}

// TestStartLogsWhatTheJournalDrops replays a crafted journal: damaged
// lines, a torn tail, and a journaled value older by its time stamp than
// the stored one. Each must leave a log line with what the operator needs.
func TestStartLogsWhatTheJournalDrops(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	db.SaveSwitchValue(context.Background(), "hall", bridge.On, now.Add(time.Hour))
	db.Close()
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	lines := []string{
		"#gen 7\n",
		ms + " on kitchen\n",
		"\x00\x00\x00\x00\n", // a page of zeros after a crash
		ms + " off hall\n",
		ms + " on garage-li",
	}
	os.WriteFile(filepath.Join(dir, store.JournalName), []byte(strings.Join(lines, "")), 0o600)
	bad := len(lines[0]) + len(lines[1])
	torn := bad + len(lines[2]) + len(lines[3])

	logs := openWithLogs(t, dir)
	for _, want := range []string{
		`msg="recovered switch values from the journal" values=2`,
		`msg="value journal: unreadable lines skipped; the switches they were for come back with their value from before them" file=` +
			filepath.Join(dir, store.JournalName) + " lines=1 offsets=" + strconv.Itoa(bad),
		`msg="value journal: cut a torn last line (a write cut short: its command was never acknowledged)" file=` +
			filepath.Join(dir, store.JournalName) + " offset=" + strconv.Itoa(torn) + " bytes=" + strconv.Itoa(len(lines[4])),
		`replaces a stored value with a later time stamp; the journal's order wins (the clock stepped back)" switch=hall value=off`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s\n%s", want, logs)
		}
	}
	// A second start has nothing left to say.
	if logs := openWithLogs(t, dir); strings.Contains(logs, "value journal") {
		t.Errorf("second start:\n%s", logs)
	}
}
