package asynclog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/logtest"
)

// callerKey marks the context of a logging call, so that a handler can
// tell whether it runs within the call or later on the writer's goroutine.
type callerKey struct{}

// spyHandler counts the records its inner handler formats within the
// logging call (the context carries callerKey) and later.
type spyHandler struct {
	slog.Handler
	mu            *sync.Mutex
	inCall, later *int
}

func (s spyHandler) Handle(ctx context.Context, r slog.Record) error {
	s.mu.Lock()
	if ctx.Value(callerKey{}) != nil {
		*s.inCall++
	} else {
		*s.later++
	}
	s.mu.Unlock()
	return s.Handler.Handle(ctx, r)
}

func (s spyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	s.Handler = s.Handler.WithAttrs(as)
	return s
}

func (s spyHandler) WithGroup(name string) slog.Handler {
	s.Handler = s.Handler.WithGroup(name)
	return s
}

// fixedTime makes the formatted lines comparable.
func fixedTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Time(slog.TimeKey, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	}
	return a
}

// logSome writes the same lines to l: plain ones, ones with values that
// are formatted at once, attributes and groups of the logger's own.
func logSome(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, "api request", "method", "PUT", "path", "/switches/on", "status", 204, "duration_seconds", 0.0012)
	l.With("installation", "in1").WarnContext(ctx, "command", "outcome", "failed", "error", errors.New("plug a: no answer"))
	l.WithGroup("g").InfoContext(ctx, "grouped", slog.Group("inner", "ok", true, "took", time.Second), "at", time.Unix(0, 0).UTC())
	l.DebugContext(ctx, "not enabled")
	l.InfoContext(ctx, "any", "switches", []string{"a", "b"}, "n", uint64(7))
}

// The lines are those the format's handler writes when called directly,
// in the order logged, for both formats.
func TestHandlerWritesWhatItsFormatWrites(t *testing.T) {
	for name, format := range map[string]func(io.Writer, *slog.HandlerOptions) slog.Handler{
		"text": func(w io.Writer, o *slog.HandlerOptions) slog.Handler { return slog.NewTextHandler(w, o) },
		"json": func(w io.Writer, o *slog.HandlerOptions) slog.Handler { return slog.NewJSONHandler(w, o) },
	} {
		t.Run(name, func(t *testing.T) {
			opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: fixedTime}
			var direct bytes.Buffer
			logSome(context.Background(), slog.New(format(&direct, opts)))

			var out logtest.Buffer
			w := New(&out, 0)
			l := slog.New(w.Handler(func(o io.Writer) slog.Handler { return format(o, opts) }))
			logSome(context.Background(), l)
			w.Write([]byte("a plain line\n"))
			logSome(context.Background(), l)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := direct.String() + "a plain line\n" + direct.String()
			if out.String() != want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), want)
			}
		})
	}
}

// A record of plain values is formatted on the writer's goroutine, not
// in the call; one holding a value that could change (an error, a slice)
// is formatted in the call, so the line shows the value as it was.
func TestHandlerFormatsLaterOnlyWhatCannotChange(t *testing.T) {
	var mu sync.Mutex
	var inCall, later int
	var out logtest.Buffer
	w := New(&out, 0)
	l := slog.New(w.Handler(func(o io.Writer) slog.Handler {
		return spyHandler{Handler: slog.NewTextHandler(o, nil), mu: &mu, inCall: &inCall, later: &later}
	}))
	ctx := context.WithValue(context.Background(), callerKey{}, true)
	for range 10 {
		l.InfoContext(ctx, "api request", "method", "PUT", "status", 204, "took", time.Millisecond, slog.Group("g", "at", time.Now()))
	}
	switches := []string{"kettle"}
	l.InfoContext(ctx, "command", "switches", switches)
	switches[0] = "changed"
	w.Close()
	if inCall != 1 || later != 10 {
		t.Errorf("formatted in the call %d, later %d; want 1 and 10", inCall, later)
	}
	if !strings.Contains(out.String(), "switches=[kettle]") {
		t.Errorf("a value changed after the call shows its new value:\n%s", out.String())
	}
}

// A stuck output never holds up a logging call: the queue is bounded, the
// records it cannot take are counted, and those kept come out once the
// output reads again.
func TestHandlerNeverBlocksOnAStuckOutput(t *testing.T) {
	out := &blockedOutput{release: make(chan struct{})}
	const size = 8192 // 32 records
	w := New(out, size)
	l := slog.New(w.Handler(func(o io.Writer) slog.Handler { return slog.NewTextHandler(o, nil) }))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			l.Info("api request", "i", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a logging call blocked on a stuck output")
	}
	if w.Dropped() == 0 {
		t.Error("nothing dropped though the output took nothing")
	}
	close(out.release)
	w.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if got := uint64(len(lines)); got+w.Dropped() != 5000 {
		t.Errorf("%d written + %d dropped != 5000", got, w.Dropped())
	}
	last := -1
	for _, line := range lines {
		var i int
		if _, err := fmt.Sscanf(line[strings.Index(line, " i=")+1:], "i=%d", &i); err != nil || i <= last {
			t.Fatalf("line %q torn or out of order (after %d)", line, last)
		}
		last = i
	}
}

// Loggers on many goroutines, plain records and others mixed: each
// goroutine's lines come out whole and in its order, none lost.
func TestHandlerConcurrentLoggers(t *testing.T) {
	var out logtest.Buffer
	w := New(&out, 0)
	l := slog.New(w.Handler(func(o io.Writer) slog.Handler { return slog.NewTextHandler(o, nil) }))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				if i%3 == 0 {
					l.Info("line", "g", g, "i", i, "err", errors.New("e"))
				} else {
					l.Info("line", "g", g, "i", i)
				}
			}
		})
	}
	wg.Wait()
	// Logging after Close goes straight out, after everything before.
	w.Close()
	l.Info("after close", "err", errors.New("e"))
	l.Info("after close, plain")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*300+2 {
		t.Fatalf("%d lines, want %d", len(lines), 8*300+2)
	}
	next := map[int]int{}
	for _, line := range lines[:8*300] {
		var g, i int
		rest := line[strings.Index(line, "msg=line"):]
		if _, err := fmt.Sscanf(rest, "msg=line g=%d i=%d", &g, &i); err != nil || next[g] != i {
			t.Fatalf("line %q out of order or torn", line)
		}
		next[g]++
	}
	if !strings.Contains(lines[8*300], "after close") || !strings.Contains(lines[8*300+1], "after close, plain") {
		t.Errorf("lines after Close: %q", lines[8*300:])
	}
}
