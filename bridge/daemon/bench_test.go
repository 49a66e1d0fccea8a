package daemon_test

import (
	"net/http"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// BenchmarkPUTVirtual measures the hub's fixed cost per command: HTTP, the
// bearer check, the fan-out and the durable write of the new value, on one
// virtual switch that confirms at once, called by a bare HTTP/1.1 client
// (client=bare) and by Go's net/http client (client=net-http). The MQTT
// benchmarks add a device round trip on top of this.
//
//	go test -run '^$' -bench PUTVirtual -benchtime 3s -count 5 ./bridge/daemon/
//
// On the 2-vCPU AMD EPYC VM of BenchmarkFanout (mqtt_fanout_bench_test.go) it was about
// 100 µs with the bare client and 120–135 µs with net/http's, where a
// net/http server answering 204 from an empty handler takes about 65 µs:
// some 35 µs are the hub's own (routing, the bearer check, cached for 2 s,
// the fan-out, metrics, and the journal write that makes the new value
// durable before the 204).
func BenchmarkPUTVirtual(b *testing.B) {
	// Thousands of commands a second from one installation: the rate
	// limit would answer most of them 429.
	h := daemontest.StartWith(b, daemontest.Options{Config: hubConfig, Server: "  rate_limit: off\n"})
	alice := h.AddUser(b, "alice", "alice-pw", 1)
	app := h.AddApp(b, alice, true, redirect)
	g := h.Authorize(b, app, "alice", "alice-pw", 1, "kitchen")
	cmds := []string{"on", "off"} // a real change every time, so every command writes

	b.Run("client=bare", func(b *testing.B) {
		c := daemontest.NewBareClient(b, g)
		c.Command(b, "off") // so that the first "on" timed is a change
		for i := 0; b.Loop(); i++ {
			if status, body := c.Command(b, cmds[i%2]); status != http.StatusNoContent {
				b.Fatalf("status %d: %s", status, body)
			}
		}
	})
	b.Run("client=net-http", func(b *testing.B) {
		h.Command(b, g, "off")
		for i := 0; b.Loop(); i++ {
			if p := h.Command(b, g, cmds[i%2]); p.StatusCode != http.StatusNoContent {
				b.Fatalf("status %d: %s", p.StatusCode, p.Body)
			}
		}
	})
}
