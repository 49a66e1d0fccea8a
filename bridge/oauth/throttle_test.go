package oauth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestThrottleSchedule(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("Alice", "192.0.2.1")
	for i := 0; i < pairFree-1; i++ {
		th.fail(now, k)
	}
	if w := th.wait(now, k); w != 0 {
		t.Fatalf("slowed after %d failures: %s", pairFree-1, w)
	}
	th.fail(now, k) // the allowance used up: the first delay
	if w := th.wait(now, k); w != firstDelay {
		t.Fatalf("wait = %s, want %s", w, firstDelay)
	}
	if w := th.wait(now, newLoginKeys("alice", "192.0.2.1")); w != firstDelay {
		t.Errorf("the name's case escapes the delay: %s", w)
	}
	if w := th.wait(now.Add(firstDelay), k); w != 0 {
		t.Errorf("still waiting after the delay: %s", w)
	}
	th.fail(now.Add(firstDelay), k) // one more: the delay doubles
	if w := th.wait(now.Add(firstDelay), k); w != 2*firstDelay {
		t.Errorf("second delay = %s, want %s", w, 2*firstDelay)
	}
	// Only this pair waits: the same user from another address, and
	// another user from this address, do not.
	if w := th.wait(now.Add(firstDelay), newLoginKeys("alice", "192.0.2.2")); w != 0 {
		t.Errorf("alice from a clean address waits %s", w)
	}
	if w := th.wait(now.Add(firstDelay), newLoginKeys("bob", "192.0.2.1")); w != 0 {
		t.Errorf("bob from the attacker's address waits %s before the address allowance is used", w)
	}
	for th.failures.Count(now.Add(firstDelay), k.pair()) < pairFree+6 {
		th.fail(now.Add(firstDelay), k)
	}
	if w := th.wait(now.Add(firstDelay), k); w != maxDelay {
		t.Errorf("delay grows past its cap: %s", w)
	}
	// A correct login clears the pair and the name, not the address (an
	// attacker logging in to an account of their own); failures are
	// forgotten after a while.
	th.succeed(k)
	if th.failures.Count(now.Add(firstDelay), k.pair()) != 0 || th.failures.Count(now.Add(firstDelay), k.nameKey()) != 0 {
		t.Errorf("pair or name still counted after a success")
	}
	if w := th.wait(now.Add(firstDelay), newLoginKeys("bob", "192.0.2.1")); w == 0 {
		t.Errorf("a success cleared the address's failures")
	}
	other := newLoginKeys("carol", "192.0.2.9")
	for i := 0; i < pairFree-1; i++ {
		th.fail(now, other)
	}
	th.fail(now.Add(2*forgetAfter), other)
	if w := th.wait(now.Add(2*forgetAfter), other); w != 0 {
		t.Errorf("old failures still counted: %s", w)
	}
}

// TestThrottleAddressSpray: one address trying many names is slowed by its
// address allowance, which does not reach other addresses.
func TestThrottleAddressSpray(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	for i := 0; i < addrFree; i++ {
		th.fail(now, newLoginKeys(fmt.Sprintf("user%d", i), "192.0.2.1"))
	}
	if w := th.wait(now, newLoginKeys("fresh-name", "192.0.2.1")); w != firstDelay {
		t.Errorf("spraying address waits %s, want %s", w, firstDelay)
	}
	if w := th.wait(now, newLoginKeys("fresh-name", "192.0.2.2")); w != 0 {
		t.Errorf("another address waits %s", w)
	}
}

// TestThrottleUserBudget: failures for one name from many addresses, one
// each, use up the name's allowance: then every address without a device
// cookie waits, and other names do not.
func TestThrottleUserBudget(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	spent := 0
	for i := 0; i < userFree; i++ {
		if w := th.wait(now, newLoginKeys("alice", fmt.Sprintf("198.51.100.%d", i))); w != 0 {
			t.Fatalf("guess %d from a fresh address waits %s", i, w)
		}
		if th.fail(now, newLoginKeys("alice", fmt.Sprintf("198.51.100.%d", i))) {
			spent++
		}
	}
	if spent != 1 {
		t.Errorf("the spent allowance was reported %d times, want once", spent)
	}
	if w := th.wait(now, newLoginKeys("Alice", "203.0.113.1")); w != firstDelay {
		t.Errorf("a fresh address waits %s once the name's allowance is spent, want %s", w, firstDelay)
	}
	if w := th.wait(now, newLoginKeys("alice", "203.0.113.1").fromDevice("dev1")); w != 0 {
		t.Errorf("alice's own browser waits %s", w)
	}
	if w := th.wait(now, newLoginKeys("bob", "198.51.100.1")); w != 0 {
		t.Errorf("another name is slowed by alice's: %s", w)
	}
	if w := th.wait(now.Add(forgetAfter+time.Second), newLoginKeys("alice", "203.0.113.1")); w != 0 {
		t.Errorf("a day later, the name still waits %s", w)
	}
	// A correct password (only the user knows it) clears the name's count.
	th.succeed(newLoginKeys("alice", "203.0.113.1"))
	if w := th.wait(now, newLoginKeys("alice", "203.0.113.1")); w != 0 {
		t.Errorf("after alice logged in, the name still waits %s", w)
	}
}

// TestThrottleDevice: a browser's device cookie has an allowance of its
// own; its failures do not reach the pair, the address or the name, and
// nobody else's reach it.
func TestThrottleDevice(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("alice", "192.0.2.1")
	for i := 0; i < addrFree+userFree; i++ { // the pair, the address and the name all spent
		th.fail(now, newLoginKeys("alice", fmt.Sprintf("192.0.2.%d", i%2)))
	}
	dev := k.fromDevice("dev1")
	if w := th.wait(now, dev); w != 0 {
		t.Fatalf("the user's browser waits %s at the attacker's address", w)
	}
	for i := 0; i < deviceFree; i++ {
		th.fail(now, dev) // a stolen cookie
	}
	if w := th.wait(now, dev); w != firstDelay {
		t.Errorf("a device past its allowance waits %s, want %s", w, firstDelay)
	}
	if w := th.wait(now, k.fromDevice("dev2")); w != 0 {
		t.Errorf("another device of the user waits %s", w)
	}
	if n := th.failures.Count(now, newLoginKeys("bob", "192.0.2.7").addrOnly()); n != 0 {
		t.Errorf("device failures counted against an address")
	}
}

// TestThrottleStaysBounded: a flood of distinct names and addresses keeps
// the table bounded, and the key under attack keeps its count.
func TestThrottleStaysBounded(t *testing.T) {
	th := newThrottle()
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("alice", "192.0.2.1")
	for i := 0; i < pairFree+3; i++ {
		th.fail(now, k)
	}
	for i := 0; i < 3*maxThrottled; i++ {
		th.fail(now.Add(time.Duration(i+1)*time.Millisecond), newLoginKeys(fmt.Sprint("n", i), fmt.Sprint("a", i%5000)))
		if i%997 == 0 {
			th.fail(now.Add(time.Duration(i+1)*time.Millisecond), k) // the attack goes on
		}
	}
	if n := th.failures.Len(); n > maxThrottled {
		t.Errorf("%d keys kept, bound %d", n, maxThrottled)
	}
	if w := th.wait(now.Add(3*maxThrottled*time.Millisecond), k); w < firstDelay {
		t.Errorf("the flood wiped out the attacked pair: waits %s", w)
	}
}

// TestPasswordCheckQueueIsBounded: with every check slot busy and the
// queue full, one more login is refused at once, not queued.
func TestPasswordCheckQueueIsBounded(t *testing.T) {
	th := newThrottle()
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(maxBcryptJobs)
	outcomes := make(chan checkOutcome, maxBcryptJobs+maxBcryptQueue)
	for range maxBcryptJobs {
		go func() { outcomes <- th.check(context.Background(), func() { running.Done(); <-release }) }()
	}
	running.Wait() // both slots taken
	for range maxBcryptQueue {
		go func() { outcomes <- th.check(context.Background(), func() {}) }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		th.mu.Lock()
		q := th.queued
		th.mu.Unlock()
		if q == maxBcryptQueue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d logins queued", q)
		}
		time.Sleep(time.Millisecond)
	}
	ran := false
	if got := th.check(context.Background(), func() { ran = true }); got != queueFull || ran {
		t.Errorf("a login past the queue: outcome %d, checked %v; want refused at once", got, ran)
	}
	// A waiting login whose client goes away leaves the queue.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	th.mu.Lock()
	th.queued-- // make room for one
	th.mu.Unlock()
	if got := th.check(ctx, func() {}); got != gaveUp {
		t.Errorf("a cancelled login: outcome %d, want gaveUp", got)
	}
	th.mu.Lock()
	th.queued++
	th.mu.Unlock()
	close(release)
	for range maxBcryptJobs + maxBcryptQueue {
		if o := <-outcomes; o != checked {
			t.Errorf("a queued login: outcome %d, want checked", o)
		}
	}
}
