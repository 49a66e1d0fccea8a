package oauth

import (
	"testing"
	"time"
)

func TestThrottleSchedule(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	name, addr := "name:alice", "addr:10.0.0.1"
	for i := 0; i < nameFailures-1; i++ {
		th.fail(now, name, addr)
	}
	if w := th.wait(now, name, addr); w != 0 {
		t.Fatalf("locked after %d failures: %s", nameFailures-1, w)
	}
	th.fail(now, name, addr) // the limit: locked for firstLockout
	if w := th.wait(now, name, addr); w != firstLockout {
		t.Fatalf("wait = %s, want %s", w, firstLockout)
	}
	if w := th.wait(now.Add(firstLockout), name); w != 0 {
		t.Errorf("still locked after the lockout: %s", w)
	}
	th.fail(now.Add(firstLockout), name, addr) // one more: the lock doubles
	if w := th.wait(now.Add(firstLockout), name); w != 2*firstLockout {
		t.Errorf("second lock = %s, want %s", w, 2*firstLockout)
	}
	for i := 0; i < 30; i++ {
		th.fail(now.Add(firstLockout), name, addr)
	}
	if w := th.wait(now.Add(firstLockout), name); w != maxLockout {
		t.Errorf("lock grows past its cap: %s", w)
	}
	// The address was locked by its own, higher limit.
	if w := th.wait(now.Add(firstLockout), "addr:10.0.0.1"); w == 0 {
		t.Error("the address is not locked after many failures")
	}
	// A correct login clears the name; failures are forgotten after a while.
	th.succeed(name)
	if w := th.wait(now.Add(firstLockout), name); w != 0 {
		t.Errorf("name still locked after a success: %s", w)
	}
	other := "name:bob"
	for i := 0; i < nameFailures-1; i++ {
		th.fail(now, other, "addr:x")
	}
	th.fail(now.Add(2*forgetAfter), other, "addr:x")
	if w := th.wait(now.Add(2*forgetAfter), other); w != 0 {
		t.Errorf("old failures still counted: %s", w)
	}
}
