package failures

import (
	"fmt"
	"testing"
	"time"
)

var policy = Policy{FirstDelay: time.Second, MaxDelay: 8 * time.Second, ForgetAfter: time.Hour, MaxKeys: 100}

func TestSchedule(t *testing.T) {
	now := time.Unix(1e9, 0)
	tb := New(policy)
	b := Budget{Key: "k", Free: 2}
	for range 2 {
		if w := tb.Wait(now, b); w != 0 {
			t.Fatalf("a free failure waits %s", w)
		}
		tb.Fail(now, "k")
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		if w := tb.Wait(now, b); w != want {
			t.Fatalf("after %d failures: wait %s, want %s", tb.Count(now, "k"), w, want)
		}
		now = now.Add(want)
		if w := tb.Wait(now, b); w != 0 {
			t.Fatalf("still waiting %s once the delay is over", w)
		}
		tb.Fail(now, "k")
	}
	// The longest wait of several budgets; another key is free.
	if w := tb.Wait(now, Budget{"other", 0}, b); w != 8*time.Second {
		t.Errorf("wait of two budgets = %s", w)
	}
	if w := tb.Wait(now, Budget{"other", 0}); w != 0 {
		t.Errorf("a key that never failed waits %s", w)
	}
	// Forgotten after ForgetAfter; forgotten at once by Forget.
	if n := tb.Count(now.Add(policy.ForgetAfter+time.Second), "k"); n != 0 {
		t.Errorf("count %d after ForgetAfter", n)
	}
	if c := tb.Fail(now, "k", "j"); c[0] != 8 || c[1] != 1 {
		t.Errorf("counts %v", c)
	}
	tb.Forget("k")
	if w := tb.Wait(now, b); w != 0 {
		t.Errorf("waits %s after Forget", w)
	}
}

// A flood of new keys cannot push out a key being attacked now, and the
// table stays bounded.
func TestBounded(t *testing.T) {
	now := time.Unix(1e9, 0)
	tb := New(policy)
	for i := range 1000 {
		tb.Fail(now.Add(-time.Minute), fmt.Sprintf("flood-%d", i))
		if i%10 == 0 {
			tb.Fail(now, "attacked")
		}
	}
	if n := tb.Len(); n > policy.MaxKeys {
		t.Errorf("%d keys, bound %d", n, policy.MaxKeys)
	}
	if n := tb.Count(now, "attacked"); n != 100 {
		t.Errorf("the attacked key's count is %d, want 100", n)
	}
}

// Policy.Wait is the Table's rule for one key, for counts kept elsewhere
// (the web login's, in the database).
func TestPolicyWait(t *testing.T) {
	now := time.Unix(1e9, 0)
	for _, c := range []struct {
		name        string
		ago         time.Duration
		count, free int
		want        time.Duration
	}{
		{"never failed", 0, 0, 0, 0},
		{"within its free failures", 0, 1, 2, 0},
		{"free failures spent", 0, 2, 2, time.Second},
		{"partly waited", 300 * time.Millisecond, 2, 2, 700 * time.Millisecond},
		{"doubled, capped", 0, 10, 2, 8 * time.Second},
		{"delay over", 9 * time.Second, 10, 2, 0},
		{"forgotten", policy.ForgetAfter + time.Second, 10, 0, 0},
	} {
		if got := policy.Wait(now, now.Add(-c.ago), c.count, c.free); got != c.want {
			t.Errorf("%s: wait %s, want %s", c.name, got, c.want)
		}
	}
}

// An attacker who fails a few times and then floods the table with new
// keys, to make it forget their count, finds it still there: the flood's
// keys, each with one failure, make room among themselves.
func TestFloodAfterTheAttack(t *testing.T) {
	now := time.Unix(1e9, 0)
	tb := New(policy)
	for range 10 {
		tb.Fail(now, "attacked")
	}
	for i := range 10 * policy.MaxKeys {
		tb.Fail(now.Add(time.Second), fmt.Sprintf("flood-%d", i))
	}
	if n := tb.Len(); n > policy.MaxKeys {
		t.Errorf("%d keys, bound %d", n, policy.MaxKeys)
	}
	if n := tb.Count(now.Add(time.Second), "attacked"); n != 10 {
		t.Errorf("after the flood the attacked key's count is %d, want 10", n)
	}
}
