package mqtt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// BenchmarkCommand measures hub.Command("on") across N Tasmota plugs on a
// real Mosquitto and, interleaved in the same run, the floor: a bare paho
// client switching the same N plugs. ns/op is the hub's; ratio is hub/floor.
// The floor switches them off so neither side can mistake a late message of
// the other for its own confirmation.
func BenchmarkCommand(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			broker := mqtttest.StartMosquitto(b)
			topics, ids, sws := mqtttest.Fleet(b, broker.URL, n)
			h := startHub(b, hubConfig("broker: "+broker.URL+"\nclient_id: bench-hub", sws...))
			floor := mqtttest.NewFloor(b, broker.URL, topics)
			eventually(b, 5*time.Second, "every plug reported", func() bool {
				sts, _ := h.States(ids)
				for _, s := range sts {
					if s.State.Value == "" || !s.State.Available {
						return false
					}
				}
				return true
			})
			var hub, fl time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if err := h.Command(context.Background(), ids, bridge.CommandOn); err != nil {
					b.Fatal(err)
				}
				hub += time.Since(start)
				start = time.Now()
				floor.Switch(b, "OFF", 5*time.Second)
				fl += time.Since(start)
			}
			b.ReportMetric(float64(hub.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(fl.Nanoseconds())/float64(b.N), "floor-ns/op")
			b.ReportMetric(float64(hub)/float64(fl), "ratio")
		})
	}
}
