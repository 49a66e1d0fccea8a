package recentlog_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/infra/recentlog"
)

func TestRingKeepsTheLastWarnings(t *testing.T) {
	var out bytes.Buffer
	ring := recentlog.NewRing(slog.LevelWarn)
	log := slog.New(ring.Wrap(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	log.Info("an info line")
	log.With("component", "mqtt").WithGroup("plug").Warn("plug offline", "id", "lamp")
	for i := range recentlog.Keep + 5 {
		log.Error("failure", "n", i)
	}
	recs := ring.Records()
	if len(recs) != recentlog.Keep {
		t.Fatalf("kept %d records, want %d", len(recs), recentlog.Keep)
	}
	if want := fmt.Sprintf("failure n=%d", recentlog.Keep+4); recs[0].Text != want {
		t.Errorf("newest record %q, want %q", recs[0].Text, want)
	}
	if want := "failure n=5"; recs[len(recs)-1].Text != want {
		t.Errorf("oldest kept record %q, want %q", recs[len(recs)-1].Text, want)
	}
	if !strings.Contains(out.String(), "an info line") || !strings.Contains(out.String(), "plug.id=lamp") {
		t.Errorf("the wrapped handler did not get every record:\n%s", out.String())
	}

	ring2 := recentlog.NewRing(slog.LevelWarn)
	slog.New(ring2.Wrap(slog.DiscardHandler)).With("component", "mqtt").WithGroup("plug").Warn("plug offline", "id", "lamp")
	if got := ring2.Records(); len(got) != 1 || got[0].Text != "plug offline component=mqtt plug.id=lamp" {
		t.Errorf("records %+v, want the warning with its attributes", got)
	}
}

func TestRingBoundsAHostileRecord(t *testing.T) {
	ring := recentlog.NewRing(slog.LevelWarn)
	slog.New(ring.Wrap(slog.DiscardHandler)).Warn("refused", "topic", strings.Repeat("é", 10000))
	recs := ring.Records()
	if len(recs) != 1 || len(recs[0].Text) > recentlog.MaxText+len("…") {
		t.Fatalf("kept %d records, the first %d bytes long; want one of at most %d", len(recs), len(recs[0].Text), recentlog.MaxText)
	}
	if !strings.HasSuffix(recs[0].Text, "…") {
		t.Errorf("a cut record does not say it was cut: %q", recs[0].Text[len(recs[0].Text)-10:])
	}
}
