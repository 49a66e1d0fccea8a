package asynclog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// blockedOutput is a journal that does not read: writes wait until
// release is closed.
type blockedOutput struct {
	release chan struct{}
	logtest.Buffer
}

func (b *blockedOutput) Write(p []byte) (int, error) {
	<-b.release
	return b.Buffer.Write(p)
}

func TestLinesArriveInOrderAndAllAtClose(t *testing.T) {
	var out logtest.Buffer
	w := New(&out, 0)
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		w.Write([]byte(line))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Errorf("after Close, %d bytes out of %d, or out of order", len(out.String()), want.Len())
	}
	// Lines after Close go straight through.
	w.Write([]byte("stopped\n"))
	if !strings.HasSuffix(out.String(), "line 999\nstopped\n") {
		t.Errorf("a line after Close is not written through")
	}
	if w.Dropped() != 0 || w.Lines() != 1000 {
		t.Errorf("dropped %d, lines %d", w.Dropped(), w.Lines())
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A line is written without anyone flushing: within FlushEvery, here
// allowed far more for a loaded machine.
func TestLinesAreWrittenSoon(t *testing.T) {
	var out logtest.Buffer
	w := New(&out, 0)
	defer w.Close()
	for i := range 3 {
		line := fmt.Sprintf("tick %d\n", i)
		w.Write([]byte(line))
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("%q not written after 5 s", line)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// An output that does not take lines (a stuck journal, a terminal on
// pause) never holds up a request: Write returns, the lines that do not
// fit are counted, and those kept come out in order once it reads again.
func TestAStuckOutputNeverBlocksAWrite(t *testing.T) {
	out := &blockedOutput{release: make(chan struct{})}
	const size = 4096
	w := New(out, size)
	line := []byte(strings.Repeat("x", 99) + "\n") // 100 bytes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			w.Write(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Write blocked on a stuck output")
	}
	// The drainer holds at most one batch (the buffer's worth) in the
	// stuck Write; the buffer holds at most size more.
	kept := 1000 - int(w.Dropped())
	if w.Dropped() == 0 || kept > 2*size/len(line) {
		t.Errorf("dropped %d of 1000 lines into a %d-byte buffer", w.Dropped(), size)
	}
	close(out.release)
	w.Close()
	if got := len(out.String()) / len(line); got != kept {
		t.Errorf("%d lines written, %d kept", got, kept)
	}
}

func TestConcurrentWriters(t *testing.T) {
	var out logtest.Buffer
	w := New(&out, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(w, "g%d line %d\n", g, i)
			}
		})
	}
	wg.Wait()
	w.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	// Each writer's lines keep their order, whole.
	next := map[string]int{}
	for _, l := range lines {
		var g string
		var i int
		if _, err := fmt.Sscanf(l, "%s line %d", &g, &i); err != nil || next[g] != i {
			t.Fatalf("line %q out of order or torn", l)
		}
		next[g]++
	}
}
