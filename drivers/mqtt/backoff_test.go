package mqtt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBackoff walks the reconnect policy through outages on a made-up
// clock: each step is an attempt made some time after the previous one
// started, the wait the policy asks for before it, and how it ends.
func TestBackoff(t *testing.T) {
	// As paho reports a dial to a closed port: its network error wrapping
	// the dialer's.
	refused := fmt.Errorf("network Error : %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	timeout := fmt.Errorf("network Error : %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	denied := errors.New("not Authorized") // a CONNACK refusal
	ms := time.Millisecond
	type step struct {
		after time.Duration // since the previous attempt began
		wait  time.Duration // what the policy answers
		err   error         // how the attempt ends; nil: it connects
	}
	steps := []step{
		{0, 0, refused}, // the first attempt at start-up is at once
		{0, 250 * ms, refused},
		{0, 500 * ms, refused},
		{0, time.Second, refused},
		{0, time.Second, refused},      // capped while the broker refuses
		{0, time.Second, nil},          // connected…
		{12 * time.Second, 0, refused}, // …for 12 s: a new outage, tried at once
		{0, 250 * ms, refused},
		{0, 500 * ms, nil},
		{20 * time.Second, 0, refused}, // a later outage starts afresh too
		{0, 250 * ms, nil},
		{500 * ms, 500 * ms, nil},    // died young (another client with the hub's id)
		{500 * ms, time.Second, nil}, // and again: it grows
		{500 * ms, 2 * time.Second, denied},
		{0, 4 * time.Second, timeout},
		{0, 8 * time.Second, denied},
		{0, 16 * time.Second, denied},
		{0, 30 * time.Second, denied},
		{0, 30 * time.Second, refused}, // capped at 30 s for failures a retry does not cure
		{0, time.Second, refused},      // the broker now refuses fast: back to at most 1 s
		{0, time.Second, nil},
		// Outages a few seconds apart: each connection served 6 s, and
		// each first retry waits 250 ms however many came before.
		{6 * time.Second, 250 * ms, refused},
		{0, 500 * ms, refused},
		{0, time.Second, nil},
		{6 * time.Second, 250 * ms, refused},
		{0, 500 * ms, nil},
		{6 * time.Second, 250 * ms, nil},
		{6 * time.Second, 250 * ms, nil},
		{time.Hour, 0, nil},
	}
	var b backoff
	now := time.Unix(1_700_000_000, 0)
	for i, s := range steps {
		now = now.Add(s.after)
		got := b.attempt(now)
		if got != s.wait {
			t.Fatalf("step %d: wait %s, want %s", i, got, s.wait)
		}
		now = now.Add(got)
		if s.err != nil {
			b.failure(s.err)
		}
	}
}
