package mqtt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// BenchmarkCommand measures hub.Command across N Tasmota plugs on a real
// Mosquitto and, in the same run, the floor: a bare paho client switching N
// plugs of its own. ns/op is the hub's; ratio is hub/floor. The two sides
// never share plugs, so neither sees the other's traffic, and they take
// turns in blocks (mqtttest.BenchBlock), so both run under the same load.
// The reports trailing the hub's last command of a block are handled while
// the floor's block starts, a small bias in the hub's favour. Run it, and
// BenchmarkHTTPCommand (the same through the whole daemon, in
// bridge/daemon), with:
//
//	go test -run '^$' -bench 'Command$' -benchtime 3s -count 5 ./drivers/mqtt/ ./bridge/daemon/
//
// Latency follows the slowest plug, not N: the hub publishes to every plug
// at once (TestCommandFansOutConcurrently checks this without timing).
// Times grow with N here only because the N simulated plugs, the broker and
// the hub share the machine's cores, so the plugs answer one after another.
// BenchmarkFanout has the latest comparison.
func BenchmarkCommand(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			broker := mqtttest.StartMosquitto(b)
			_, ids, sws := mqtttest.Fleet(b, broker.URL, "hub", n)
			floorTopics, _, _ := mqtttest.Fleet(b, broker.URL, "floor", n)
			h := startHub(b, hubConfig("broker: "+broker.URL+"\nclient_id: bench-hub", sws...))
			floor := mqtttest.NewFloor(b, broker.URL, floorTopics)
			eventually(b, 5*time.Second, "every plug reported", func() bool {
				sts, _ := h.States(ids)
				for _, s := range sts {
					if s.State.Value == "" || !s.State.Available {
						return false
					}
				}
				return true
			})
			command := func(c bridge.Command) {
				if err := h.Command(context.Background(), ids, c); err != nil {
					b.Fatal(err)
				}
			}
			mqtttest.TimeBlock(command) // warm-up
			floor.Block(b)
			var hub, fl time.Duration
			for b.Loop() {
				hub += mqtttest.TimeBlock(command)
				fl += floor.Block(b)
			}
			ops := float64(b.N * mqtttest.BenchBlock)
			b.ReportMetric(float64(hub.Nanoseconds())/ops, "ns/op")
			b.ReportMetric(float64(fl.Nanoseconds())/ops, "floor-ns/op")
			b.ReportMetric(float64(hub)/float64(fl), "ratio")
		})
	}
}
