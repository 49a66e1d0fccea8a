package oauth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// newTestThrottle is a throttle over a real store in a temporary
// directory.
func newTestThrottle(t *testing.T) *throttle {
	t.Helper()
	db, err := records(store.Open(context.Background(), t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DB().Close() })
	return newThrottle(db, &signingKey{store: db})
}

func mustWait(t *testing.T, th *throttle, now time.Time, k loginKeys) time.Duration {
	t.Helper()
	w, err := th.wait(context.Background(), now, k)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// mustFail counts a failure against the login's keys whether or not it
// would have to wait, as a login that had passed the check before would.
func mustFail(t *testing.T, th *throttle, now time.Time, k loginKeys) {
	t.Helper()
	ctx := context.Background()
	keys := make([]string, 0, 3)
	for _, b := range k.budgets() {
		keys = append(keys, b.Key)
	}
	stored, err := th.stored(ctx, keys...)
	if err != nil {
		t.Fatal(err)
	}
	always := func([]bridge.FailureCount) bool { return true }
	if _, _, err := th.store.ChargeLoginFailure(ctx, now, now.Add(-policy.ForgetAfter), th.maxKeys, always, stored...); err != nil {
		t.Fatal(err)
	}
}

// mustCharge charges a login that need not wait.
func mustCharge(t *testing.T, th *throttle, now time.Time, k loginKeys) *charge {
	t.Helper()
	c, wait, err := th.charge(context.Background(), now, k)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || wait != 0 {
		t.Fatalf("a login that need not wait waits %s", wait)
	}
	return c
}

// mustSucceed is a correct login at now.
func mustSucceed(t *testing.T, th *throttle, now time.Time, k loginKeys) {
	t.Helper()
	if err := th.succeed(context.Background(), mustCharge(t, th, now, k)); err != nil {
		t.Fatal(err)
	}
}

// count is a key's failures at now.
func count(t *testing.T, th *throttle, now time.Time, key string) int {
	t.Helper()
	ctx := context.Background()
	stored, err := th.stored(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := th.store.LoginFailures(ctx, now.Add(-policy.ForgetAfter), stored...)
	if err != nil {
		t.Fatal(err)
	}
	return c[0].Count
}

func TestThrottleSchedule(t *testing.T) {
	th := newTestThrottle(t)
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("Alice", "192.0.2.1")
	for i := 0; i < pairFree-1; i++ {
		mustFail(t, th, now, k)
	}
	if w := mustWait(t, th, now, k); w != 0 {
		t.Fatalf("slowed after %d failures: %s", pairFree-1, w)
	}
	mustFail(t, th, now, k) // the allowance used up: the first delay
	if w := mustWait(t, th, now, k); w != firstDelay {
		t.Fatalf("wait = %s, want %s", w, firstDelay)
	}
	if w := mustWait(t, th, now, newLoginKeys("alice", "192.0.2.1")); w != firstDelay {
		t.Errorf("the name's case escapes the delay: %s", w)
	}
	if w := mustWait(t, th, now.Add(firstDelay), k); w != 0 {
		t.Errorf("still waiting after the delay: %s", w)
	}
	mustFail(t, th, now.Add(firstDelay), k) // one more: the delay doubles
	if w := mustWait(t, th, now.Add(firstDelay), k); w != 2*firstDelay {
		t.Errorf("second delay = %s, want %s", w, 2*firstDelay)
	}
	// Only this pair waits: the same user from another address, and
	// another user from this address, do not.
	if w := mustWait(t, th, now.Add(firstDelay), newLoginKeys("alice", "192.0.2.2")); w != 0 {
		t.Errorf("alice from a clean address waits %s", w)
	}
	if w := mustWait(t, th, now.Add(firstDelay), newLoginKeys("bob", "192.0.2.1")); w != 0 {
		t.Errorf("bob from the attacker's address waits %s before the address allowance is used", w)
	}
	for count(t, th, now.Add(firstDelay), k.pair()) < pairFree+6 {
		mustFail(t, th, now.Add(firstDelay), k)
	}
	if w := mustWait(t, th, now.Add(firstDelay), k); w != maxDelay {
		t.Errorf("delay grows past its cap: %s", w)
	}
	// A correct login, once the delay is over, clears the pair and the
	// name, not the address (an attacker logging in to an account of
	// their own), whose charge for the login is taken back; failures are
	// forgotten after a while.
	addrBefore := count(t, th, now.Add(firstDelay), k.addrOnly())
	mustSucceed(t, th, now.Add(firstDelay+maxDelay), k)
	if count(t, th, now.Add(firstDelay), k.pair()) != 0 || count(t, th, now.Add(firstDelay), k.nameKey()) != 0 {
		t.Errorf("pair or name still counted after a success")
	}
	if n := count(t, th, now.Add(firstDelay), k.addrOnly()); n != addrBefore {
		t.Errorf("the address counts %d failures after a success, %d before it", n, addrBefore)
	}
	if w := mustWait(t, th, now.Add(firstDelay), newLoginKeys("bob", "192.0.2.1")); w == 0 {
		t.Errorf("a success cleared the address's failures")
	}
	if w := mustWait(t, th, now.Add(firstDelay+maxDelay), newLoginKeys("bob", "192.0.2.1")); w != 0 {
		t.Errorf("the success's charge was not taken back: the address waits %s", w)
	}
	other := newLoginKeys("carol", "192.0.2.9")
	for i := 0; i < pairFree-1; i++ {
		mustFail(t, th, now, other)
	}
	mustFail(t, th, now.Add(2*forgetAfter), other)
	if w := mustWait(t, th, now.Add(2*forgetAfter), other); w != 0 {
		t.Errorf("old failures still counted: %s", w)
	}
}

// TestThrottleAddressSpray: one address trying many names is slowed by its
// address allowance, which does not reach other addresses.
func TestThrottleAddressSpray(t *testing.T) {
	th := newTestThrottle(t)
	now := time.Unix(1_000_000, 0)
	for i := 0; i < addrFree; i++ {
		mustFail(t, th, now, newLoginKeys(fmt.Sprintf("user%d", i), "192.0.2.1"))
	}
	if w := mustWait(t, th, now, newLoginKeys("fresh-name", "192.0.2.1")); w != firstDelay {
		t.Errorf("spraying address waits %s, want %s", w, firstDelay)
	}
	if w := mustWait(t, th, now, newLoginKeys("fresh-name", "192.0.2.2")); w != 0 {
		t.Errorf("another address waits %s", w)
	}
}

// TestThrottleUserBudget: failures for one name from many addresses, one
// each, use up the name's allowance: then every address without a device
// cookie waits, and other names do not.
func TestThrottleUserBudget(t *testing.T) {
	th := newTestThrottle(t)
	now := time.Unix(1_000_000, 0)
	spent := 0
	for i := 0; i < userFree; i++ {
		if w := mustWait(t, th, now, newLoginKeys("alice", fmt.Sprintf("198.51.100.%d", i))); w != 0 {
			t.Fatalf("guess %d from a fresh address waits %s", i, w)
		}
		// A wrong password leaves the charge.
		if mustCharge(t, th, now, newLoginKeys("alice", fmt.Sprintf("198.51.100.%d", i))).nameSpent() {
			spent++
		}
	}
	if spent != 1 {
		t.Errorf("the spent allowance was reported %d times, want once", spent)
	}
	if w := mustWait(t, th, now, newLoginKeys("Alice", "203.0.113.1")); w != firstDelay {
		t.Errorf("a fresh address waits %s once the name's allowance is spent, want %s", w, firstDelay)
	}
	if c, w, err := th.charge(context.Background(), now, newLoginKeys("alice", "203.0.113.2")); err != nil || c != nil || w != firstDelay {
		t.Errorf("charged past the name's allowance: %v, wait %s, %v", c != nil, w, err)
	}
	if n := count(t, th, now, newLoginKeys("alice", "203.0.113.2").addrOnly()); n != 0 {
		t.Errorf("a refused charge counted %d failures against the address", n)
	}
	if w := mustWait(t, th, now, newLoginKeys("alice", "203.0.113.1").fromDevice("dev1")); w != 0 {
		t.Errorf("alice's own browser waits %s", w)
	}
	if w := mustWait(t, th, now, newLoginKeys("bob", "198.51.100.1")); w != 0 {
		t.Errorf("another name is slowed by alice's: %s", w)
	}
	if w := mustWait(t, th, now.Add(forgetAfter+time.Second), newLoginKeys("alice", "203.0.113.1")); w != 0 {
		t.Errorf("a day later, the name still waits %s", w)
	}
	// A correct password (only the user knows it), once the delay is
	// over, clears the name's count.
	mustSucceed(t, th, now.Add(firstDelay), newLoginKeys("alice", "203.0.113.1"))
	if w := mustWait(t, th, now.Add(firstDelay), newLoginKeys("alice", "203.0.113.1")); w != 0 {
		t.Errorf("after alice logged in, the name still waits %s", w)
	}
}

// TestThrottleDevice: a browser's device cookie has an allowance of its
// own; its failures do not reach the pair, the address or the name, and
// nobody else's reach it.
func TestThrottleDevice(t *testing.T) {
	th := newTestThrottle(t)
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("alice", "192.0.2.1")
	for i := 0; i < addrFree+userFree; i++ { // the pair, the address and the name all spent
		mustFail(t, th, now, newLoginKeys("alice", fmt.Sprintf("192.0.2.%d", i%2)))
	}
	dev := k.fromDevice("dev1")
	if w := mustWait(t, th, now, dev); w != 0 {
		t.Fatalf("the user's browser waits %s at the attacker's address", w)
	}
	for i := 0; i < deviceFree; i++ {
		mustFail(t, th, now, dev) // a stolen cookie
	}
	if w := mustWait(t, th, now, dev); w != firstDelay {
		t.Errorf("a device past its allowance waits %s, want %s", w, firstDelay)
	}
	if w := mustWait(t, th, now, k.fromDevice("dev2")); w != 0 {
		t.Errorf("another device of the user waits %s", w)
	}
	if n := count(t, th, now, newLoginKeys("bob", "192.0.2.7").addrOnly()); n != 0 {
		t.Errorf("device failures counted against an address")
	}
}

// TestThrottleStaysBounded: a flood of distinct names and addresses keeps
// the table bounded (early flood keys are dropped), and the key under
// attack keeps its count.
func TestThrottleStaysBounded(t *testing.T) {
	th := newTestThrottle(t)
	th.maxKeys = 60 // policy.MaxKeys takes 10,000 logins to fill
	now := time.Unix(1_000_000, 0)
	k := newLoginKeys("alice", "192.0.2.1")
	for i := 0; i < pairFree+3; i++ {
		mustFail(t, th, now, k)
	}
	first := newLoginKeys("n0", "a0")
	for i := 0; i < 3*th.maxKeys; i++ {
		at := now.Add(time.Duration(i+1) * time.Millisecond)
		mustFail(t, th, at, newLoginKeys(fmt.Sprint("n", i), fmt.Sprint("a", i%50)))
		if i%10 == 0 {
			mustFail(t, th, at, k) // the attack goes on
		}
	}
	end := now.Add(3 * time.Duration(th.maxKeys) * time.Millisecond)
	if n := count(t, th, end, first.nameKey()); n != 0 {
		t.Errorf("the oldest flood key is still counted (%d): the table is not bounded", n)
	}
	if w := mustWait(t, th, end, k); w < firstDelay {
		t.Errorf("the flood wiped out the attacked pair: waits %s", w)
	}
}

// TestPasswordCheckQueueIsBounded: with every check slot busy and the
// queue full, one more login is refused at once, not queued.
func TestPasswordCheckQueueIsBounded(t *testing.T) {
	th := newThrottle(nil, nil)
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
