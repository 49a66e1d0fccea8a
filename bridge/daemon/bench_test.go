package daemon_test

import (
	"net/http"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// BenchmarkPUTVirtual measures the hub's fixed cost per command: HTTP, the
// bearer check, the fan-out and the durable write of the new value, on one
// virtual switch that confirms at once. The MQTT benchmarks add a device
// round trip on top of this.
func BenchmarkPUTVirtual(b *testing.B) {
	h := daemontest.Start(b, hubConfig)
	alice := h.AddUser(b, "alice", "alice-pw", 1)
	app := h.AddApp(b, alice, true, redirect)
	g := h.Authorize(b, app, "alice", "alice-pw", 1, "kitchen")
	req := func(cmd string) *http.Request {
		r, _ := http.NewRequest(http.MethodPut, g.URI+"/switches/"+cmd, nil)
		r.Header.Set("Authorization", "Bearer "+g.Token.AccessToken)
		return r
	}
	on, off := req("on"), req("off")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := on
		if i%2 == 1 {
			r = off // a real change every time, so every command writes
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
