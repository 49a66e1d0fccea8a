package replica_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/link"
)

func lastUsed(t *testing.T, pl *platform, id string) time.Time {
	t.Helper()
	in, err := accounts.New(pl.db).Installation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in.LastUsedAt
}

// TestHubReportsUsage: a token accepted at a hub shows as used at the
// platform; a use while the platform is away is reported once the link is
// back; a hub cannot report for another hub's installations.
func TestHubReportsUsage(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	hub := startHub(t, pl, "h1", 10) // its link reports the uses of its tokens

	in := pl.install(t, 10, "hub-token")
	other := pl.installApp(t, "c2", 10, "other-token")
	waitUntil(t, "the installations reach the hub", func() bool { return hub.has(in.ID) && hub.has(other.ID) })
	if _, err := hub.auth.Authorize(ctx, "hub-token", in.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the platform records the use at the hub", func() bool { return !lastUsed(t, pl, in.ID).IsZero() })

	// Another hub's report on h1's installation is not recorded.
	if c, body := pl.do(t, "PUT", link.UsagePath, "h2", pl.hubs["h2"], `{"used":{"`+other.ID+`":1700000000}}`); c != http.StatusNoContent {
		t.Fatalf("h2's usage report: %d %s", c, body)
	}
	if !lastUsed(t, pl, other.ID).IsZero() {
		t.Error("h2 reported a use of h1's installation")
	}
	for _, bad := range []string{`{"used":`, `{"used":{}} {}`, `[]`} {
		if c, _ := pl.do(t, "PUT", link.UsagePath, "h2", pl.hubs["h2"], bad); c != http.StatusBadRequest {
			t.Errorf("usage report %s: %d, want 400", bad, c)
		}
	}
	if c, _ := pl.do(t, "PUT", link.UsagePath, "h1", "wrong", `{"used":{}}`); c != http.StatusUnauthorized {
		t.Errorf("usage report with a wrong secret: %d, want 401", c)
	}

	// The platform goes away; a use at the hub waits for the link.
	addr := pl.srv.Listener.Addr().String()
	pl.srv.CloseClientConnections()
	pl.srv.Close()
	waitUntil(t, "the hub sees its link down", func() bool { return !hub.h.Up() })
	if _, err := hub.auth.Authorize(ctx, "other-token", other.ID); err != nil {
		t.Fatalf("the hub without its platform: %v", err)
	}
	waitUntil(t, "the use is kept for the next report", func() bool {
		return replica.PendingUsage(hub.h) > 0
	})
	if !lastUsed(t, pl, other.ID).IsZero() {
		t.Fatal("recorded while the platform was away: the check below proves nothing")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the platform's port was taken meanwhile: %v", err)
	}
	mux := http.NewServeMux()
	pl.p.Register(mux)
	back := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	back.Start()
	t.Cleanup(back.Close)
	deadline := time.Now().Add(20 * time.Second)
	for lastUsed(t, pl, other.ID).IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the use made while the platform was away never reached it")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUsageReportsMergeOnASlowLink: a usage report the platform does not
// answer is not in the way of the link (the hub keeps following the
// changes while it hangs) and the uses noted meanwhile go out with it,
// merged, once the platform answers again.
func TestUsageReportsMergeOnASlowLink(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	var hanging atomic.Int32 // usage reports held now
	var hang atomic.Bool
	hang.Store(true)
	// goneSeen closes when the uninstall below reached the hub; a report
	// the hub still waited on then proves the report was not in the way
	// of the poll that brought it (a report sent before each poll, as
	// the hub once did, has always ended, given up, by then).
	goneSeen := make(chan struct{})
	var openWhenGone atomic.Bool
	inner := pl.srv.Config.Handler
	pl.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == link.UsagePath && hang.Load() {
			hanging.Add(1)
			defer hanging.Add(-1)
			io.Copy(io.Discard, r.Body) // then the server hears the hub go
			select {
			case <-goneSeen:
				if r.Context().Err() == nil {
					openWhenGone.Store(true)
				}
			case <-r.Context().Done(): // the hub gives up
			}
			<-r.Context().Done()
			return
		}
		inner.ServeHTTP(w, r)
	})
	hub := startHub(t, pl, "h1", 10)
	first := pl.install(t, 10, "first-token")
	second := pl.installApp(t, "c2", 10, "second-token")
	gone := pl.installApp(t, "c3", 10, "gone-token")
	waitUntil(t, "the installations reach the hub", func() bool { return hub.has(first.ID) && hub.has(second.ID) && hub.has(gone.ID) })

	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	hub.h.MarkUsed(ctx, map[string]time.Time{first.ID: at})
	waitUntil(t, "the report reaches the platform, which holds it", func() bool { return hanging.Load() > 0 })
	hub.h.MarkUsed(ctx, map[string]time.Time{second.ID: at})
	if err := accounts.New(pl.db).Uninstall(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "an uninstall reaches the hub while its usage report hangs", func() bool { return !hub.has(gone.ID) })
	close(goneSeen)
	waitUntil(t, "the held reports hear the uninstall", func() bool { return openWhenGone.Load() || hanging.Load() == 0 })
	if !openWhenGone.Load() {
		t.Error("no usage report was open when the uninstall reached the hub: the report held up the poll")
	}
	if !lastUsed(t, pl, first.ID).IsZero() {
		t.Fatal("a use recorded while the platform held every report: the check below proves nothing")
	}
	hang.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for !lastUsed(t, pl, first.ID).Equal(at) || !lastUsed(t, pl, second.ID).Equal(at) {
		if time.Now().After(deadline) {
			t.Fatalf("uses noted while the platform held the reports: %v, %v, want both %v", lastUsed(t, pl, first.ID), lastUsed(t, pl, second.ID), at)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !hub.h.Up() {
		t.Error("the link went down over a usage report")
	}
}

// TestLinkMetrics: the hub shows its round-trip estimate, its syncs on a
// miss by outcome and the tombstones it keeps.
func TestLinkMetrics(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	pl.p.WakeInterval = time.Hour // a poll brings changes at its end only: a miss syncs
	hub := startHub(t, pl, "h1", 10)
	reg := prometheus.NewPedanticRegistry()
	if err := hub.h.Register(reg); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	value := func(name string, labels ...string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if len(labels) == 0 || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == labels[0]) {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	// The inventory the link came up with is a round trip.
	if rtt := value("switchbridge_platform_link_rtt_seconds"); rtt < 0 {
		t.Errorf("rtt %v after the link came up, want an estimate", rtt)
	}
	waitUntil(t, "the hub's first snapshot", func() bool {
		st, err := hubstore.New(hub.db).ReplicaState(ctx)
		return err == nil && st.Synced
	})
	in := pl.install(t, 10, "a-token")
	applied := value("switchbridge_platform_link_syncs_total", "applied")
	if _, err := hub.auth.Authorize(ctx, "a-token", in.ID); err != nil {
		t.Fatal(err)
	}
	if got := value("switchbridge_platform_link_syncs_total", "applied"); got != applied+1 {
		t.Errorf("syncs applied %v → %v after a miss", applied, got)
	}
	if n := value("switchbridge_platform_replica_tombstones"); n != 0 {
		t.Errorf("%v tombstones before any deletion", n)
	}
	if err := accounts.New(pl.db).Uninstall(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the uninstall reaches the hub and leaves a tombstone", func() bool { return value("switchbridge_platform_replica_tombstones") >= 1 && !hub.has(in.ID) })
}
