package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/infra/version"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// healthItems are the console overview's lines: version, uptime, the
// store, the switches, the broker, the hubs, then the log's last
// warnings and errors, newest first.
func healthItems(ctx context.Context, d *Daemon) []console.HealthItem {
	items := []console.HealthItem{
		{Name: "Version", Value: version.Get().String()},
		{Name: "Running since", Value: d.started.Local().Format("2 Jan 2006 15:04") + " (" + time.Since(d.started).Round(time.Second).String() + ")"},
	}
	st := console.HealthItem{Name: "Store", Value: "SQLite in " + d.Config.DataDir}
	if d.Store.Dialect() == store.Postgres {
		st.Value = "PostgreSQL"
	}
	if err := d.Store.Ping(ctx); err != nil {
		st.Value += ": not answering (" + err.Error() + ")"
		st.Problem = true
	}
	items = append(items, st)
	if sb := d.Hub.Switchboard; sb != nil && len(sb.Locations()) > 0 {
		all, down := 0, 0
		for _, s := range sb.Switches() {
			all++
			if !s.Device.State().Available {
				down++
			}
		}
		items = append(items, console.HealthItem{Name: "Switches", Value: fmt.Sprintf("%d, %d of them unavailable", all, down), Problem: down > 0})
	}
	items = append(items, mqttHealth(d)...)
	if l := d.Link; l != nil {
		it := console.HealthItem{Name: "Platform link", Value: "linked to " + d.Config.Platform.URL + ", replica " + l.ReplicaAge().Round(time.Second).String() + " old"}
		if !l.Up() {
			it.Value, it.Problem = "not linked to "+d.Config.Platform.URL, true
			if why := l.Refused(); why != "" {
				it.Value += ": " + why
			}
		}
		items = append(items, it)
	}
	if d.Platform != nil {
		if hubs, err := d.Accounts.Hubs(ctx); err == nil && len(hubs) > 0 {
			online := 0
			for _, h := range hubs {
				if !h.LastSeen.IsZero() && time.Since(h.LastSeen) < linkserver.OnlineWithin {
					online++
				}
			}
			items = append(items, console.HealthItem{Name: "Hubs", Value: fmt.Sprintf("%d registered, %d linked now", len(hubs), online), Problem: online < len(hubs)})
		}
	}
	recs := d.recent.Records()
	if len(recs) == 0 {
		items = append(items, console.HealthItem{Name: "Log", Value: "no warnings since the start"})
	}
	for _, r := range recs {
		items = append(items, console.HealthItem{Name: r.Level.String() + " " + r.Time.Local().Format("2 Jan 15:04:05"), Value: r.Text, Problem: true})
	}
	return items
}

// mqttHealth is the MQTT driver's lines, read back from its metrics (the
// driver exports them; nothing else in the daemon knows a driver): its
// connection to the broker and, when the broker is the embedded one, the
// clients connected to it. None without an MQTT switch.
func mqttHealth(d *Daemon) []console.HealthItem {
	mfs, err := d.Metrics.Registry().Gather()
	if err != nil && len(mfs) == 0 {
		return nil
	}
	var items, clients []console.HealthItem
	for _, mf := range mfs {
		switch mf.GetName() {
		case "switchbridge_mqtt_connected":
			for _, m := range mf.GetMetric() {
				broker := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == "broker" {
						broker = l.GetValue()
					}
				}
				it := console.HealthItem{Name: "MQTT broker", Value: "connected to " + broker}
				if m.GetGauge().GetValue() != 1 {
					it.Value, it.Problem = "not connected to "+broker+": the MQTT switches are unavailable until the hub reconnects", true
				}
				items = append(items, it)
			}
		case "switchbridge_mqtt_broker_clients":
			for _, m := range mf.GetMetric() {
				clients = append(clients, console.HealthItem{Name: "Embedded broker", Value: fmt.Sprintf("%d clients connected (plugs, bridges, devices onboarding)", int(m.GetGauge().GetValue()))})
			}
		}
	}
	return append(items, clients...)
}
