package daemon_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/asynclog"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

var (
	fanoutRequests = flag.Int("fanout.requests", 200, "BenchmarkFanout: timed requests per target and N (rounded up to a multiple of 8)")
	fanoutN        = flag.String("fanout.n", "1,10,100", "BenchmarkFanout: comma-separated plug counts")
	fanoutLog      = flag.Bool("fanout.log", true, "BenchmarkFanout: the hub logs at info to a file through the log buffer, as serve logs to the journal (false: discarded)")
	fanoutNodeRED  = flag.Bool("fanout.nodered", true, "BenchmarkFanout: include Node-RED when node and npm are there (false: leave it out, e.g. while profiling)")
)

// BenchmarkFanout is the fan-out comparison `make bench` prints: one HTTP
// request that switches N Tasmota plugs and answers once each has
// confirmed, timed for four targets in one run. `make bench
// BENCH_REQUESTS=400 BENCH_N=1,100` changes the requests per cell and the
// plug counts (the -fanout.requests and -fanout.n flags). Loopback only;
// not part of `make test`.
//
//   - floor: a bare paho client publishing the N commands (QoS 0, as the
//     hub) and waiting for the N stat/<topic>/RESULT replies through one
//     wildcard subscription, matched by their bytes (mqtttest.Floor); no
//     HTTP at all.
//   - bare-HTTP: a minimal net/http handler doing the floor's work for PUT
//     /switches/on|off (mqtttest.StartBareHTTP): no authentication, no
//     storage, no logs. The fair limit for "an HTTP call that switches N
//     plugs".
//   - hub: PUT /switches/on|off through the whole hub (bearer check,
//     installation lookup, fan-out, mqtt driver, durable value journal
//     before the 204, metrics).
//   - Node-RED: the flow a skilled user draws: http in → one function
//     node that sends a message per plug to mqtt out (QoS 0) and tracks the
//     plugs still to confirm → one mqtt in on stat/+/POWER (QoS 0, a plain
//     string) back into it → http response (mqtttest.StartNodeRED), when
//     node and npm are there; npm installs node-red@4 into a temporary
//     directory (or NODE_RED_DIR holds an install).
//
// Method. One Mosquitto on a free loopback port with set_tcp_nodelay true.
// Each target has its own fleet of N simulated plugs (mqtttest.Fleet, in
// this process), so none handles another's traffic while it is timed. The
// HTTP targets are called over one kept-alive connection by the same bare
// HTTP/1.1 client (daemontest.DialBare). Targets take turns in blocks of
// mqtttest.BenchBlock requests, the order rotating every round, so all run
// under the same load; -fanout.requests (200) timed requests per target
// after one warm-up block; p50 of single requests. Absolute times move with
// the machine's load, the ratios much less: compare within one run.
//
// Measured on 2026-11-25 against the references above, `make bench
// BENCH_REQUESTS=200`, on the 2-vCPU AMD EPYC VM (load average 1.2–2 from
// other work), Go 1.26.8, Mosquitto 2.0.11, Node-RED 4.1.15 on Node 20.20,
// the hub logging through its log buffer and commanding at QoS 0:
//
//	| N   | floor p50 / p99  | bare-HTTP p50 / p99 | hub p50 / p99    | Node-RED p50 / p99 | hub/bare-HTTP | hub/Node-RED |
//	| 1   | 0.16 / 0.98 ms   | 0.20 / 1.57 ms      | 0.29 / 1.81 ms   | 0.74 / 7.01 ms     | 1.43          | 0.39         |
//	| 10  | 0.91 / 5.76 ms   | 0.94 / 4.15 ms      | 1.28 / 7.15 ms   | 1.75 / 6.16 ms     | 1.36          | 0.73         |
//	| 100 | 6.75 / 19.17 ms  | 6.33 / 19.22 ms     | 8.68 / 24.12 ms  | 9.27 / 23.86 ms    | 1.37          | 0.94         |
//
// Against the stronger references the hub is still ahead of Node-RED at
// every N (narrowly at N = 100) and 1.36–1.43 times the bare handler: the
// target of 1.1 is not met. At N = 100 the old bare handler lost to the hub
// only because paho matched each of its per-plug subscriptions against
// every message (N² work); with one wildcard it does not.
//
// History: the table below was measured with weaker references than the
// ones above (a floor publishing at QoS 1, subscribing per plug and
// decoding each reply as JSON; a Node-RED flow with an mqtt in and a JSON
// parse per plug and a join node), so its ratios flatter the hub; run
// make bench for numbers against today's references.
//
// Measured on 2026-11-23, `make bench BENCH_REQUESTS=200`, on a 2-vCPU
// AMD EPYC VM shared with other builds and tests (load average 2–7 during
// the runs), Go 1.26.8, Mosquitto 2.0.11, Node-RED 4.1.15 on Node 20.20,
// p50, two runs (the first of the day, before the changes below, in
// brackets):
//
//	| N   | floor   | bare-HTTP | hub     | Node-RED | hub/floor | hub/bare-HTTP        | hub/Node-RED |
//	| 1   | 0.23 ms | 0.25 ms   | 0.32 ms | 1.48 ms  | 1.40–1.67 | 1.23–1.28 (1.32)     | 0.22–0.33    |
//	| 10  | 1.41 ms | 1.40 ms   | 1.57 ms | 4.24 ms  | 1.12–1.28 | 1.13–1.28 (1.15)     | 0.37–0.40    |
//	| 100 | 15.1 ms | 15.5 ms   | 13.2 ms | 28.4 ms  | 0.83–0.87 | 0.85–0.86 (0.80)     | 0.35–0.46    |
//
// 200 requests a cell leave the ratio at N = 10 within about ±0.1; the
// profiling runs below (-fanout.nodered=false, 2000–4000 requests, two
// interleaved runs per build) measured hub/bare-HTTP 1.24–1.26 at N = 1
// (1.33–1.44 before) and 1.15 at N = 10 (1.17–1.20 before).
// Targets (issue 13): hub ≤ Node-RED at every N is met by a wide margin;
// hub ≤ 1.1× bare-HTTP is met at N = 100 and missed at N = 1 and 10.
//
// Where the hub's time goes. CPU per request from a profile with the side
// labels (go test -run '^$' -bench Fanout -fanout.n=1
// -fanout.requests=20000 -fanout.nodered=false -cpuprofile cpu.prof
// ./bridge/daemon; go tool pprof -tags, then -tagfocus side=hub): at N = 1
// the hub's goroutines used 173 µs a request, bare-HTTP's 92 µs (on this
// loaded VM everything costs 3–4 times a microbenchmark). The hub's own
// items: the two log lines, the request's and the command's, 24 µs
// (formatting about half, one write(2) each); the journal append that
// makes the new value durable before the 204, 9 µs; the access check (the
// WAL index header: an fstat and a pread), 6 µs; Prometheus label lookups,
// 4 µs; routing and parsing the plug's two reports (RESULT and the plain
// stat/<topic>/POWER that Tasmota sends after it), 12 µs. At N = 10 the
// hub used 700 µs a request and bare-HTTP 450 µs: per plug the hub's
// goroutine, the publish, the two reports and the Prometheus lookups.
// Packets the broker sends per plug and command: the hub 3 (PUBACK,
// RESULT, POWER; the plugs publish at QoS 0, so the hub sends no PUBACK),
// the floor and bare-HTTP 2 (PUBACK, RESULT). The plugs' retained
// tele/<topic>/LWT comes only at (re)connection and tele/STATE every
// TelePeriod. At N = 100 the hub beats the references because paho's
// router matches each message against every subscribed route
// (strings.Split per route), N² work that the hub avoids with one default
// handler and a map of topics.
//
// Fixed on the way: Tasmota's usual reply is matched byte for byte instead
// of decoded into a map (4 µs a plug), one long-lived publisher instead of
// a goroutine per command (its start and stack growth into paho's Publish,
// about 11 µs), the 204 sent before the log lines are written, log lines
// without runtime.Callers, an fstat instead of a stat of the -shm path.
//
// What the rest would take, at N = 1 (about 70 µs of CPU and 60–70 µs of
// p50 over bare-HTTP, against the 25 µs that 1.1× allows): the two log
// lines are a third of it, and in this closed loop the next request waits
// for the goroutine that writes them; meeting 1.1× needs one line per
// command instead of two, or a journal written by another goroutine (a
// change to what the log promises: no line lost at a crash), plus the
// journal append and the access check, which stay (durable before the
// 204; revocation at once, from any process). At N = 10 the per-plug
// remainder is mostly paho's (a token, a timer and fmt.Sprintf'd store
// keys per publish) and the goroutine the hub runs each switch in.
//
// The footprint `make bench` prints next to this table is
// BenchmarkFootprint's (cmd/switchbridge), measured the same day.
func BenchmarkFanout(b *testing.B) {
	ns, err := parseCounts(*fanoutN)
	if err != nil {
		b.Fatal(err)
	}
	requests := max(*fanoutRequests, 1)
	rounds := (requests + mqtttest.BenchBlock - 1) / mqtttest.BenchBlock

	redJS, why := "", "-fanout.nodered=false"
	if *fanoutNodeRED {
		redJS, why = mqtttest.InstallNodeRED(b, b.TempDir())
	}
	if why != "" {
		fmt.Fprintf(os.Stdout, "Node-RED left out: %s\n", why)
	}
	var rows []fanoutRow
	for _, n := range ns {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			broker := mqtttest.StartMosquitto(b)
			targets := fanoutTargets(b, broker.URL, n, redJS)
			for _, t := range targets {
				t.samples.Block(t.put) // warm-up, not kept
				t.samples = t.samples[:0]
			}
			var ms runtime.MemStats
			for b.Loop() {
				for r := range rounds {
					for k := range targets {
						t := targets[(r+k)%len(targets)]
						runtime.ReadMemStats(&ms)
						before := ms.Mallocs
						t.samples.Block(t.put)
						runtime.ReadMemStats(&ms)
						t.mallocs += ms.Mallocs - before
					}
				}
			}
			row := fanoutRow{n: n, p50: map[string]time.Duration{}, p99: map[string]time.Duration{}}
			for _, t := range targets {
				row.p50[t.name] = t.samples.Percentile(50)
				row.p99[t.name] = t.samples.Percentile(99)
				b.ReportMetric(float64(row.p50[t.name].Microseconds()), t.name+"-p50-µs")
				row.allocs = append(row.allocs, fmt.Sprintf("%s %d", t.name, t.mallocs/uint64(len(t.samples))))
			}
			row.requests = len(targets[0].samples)
			b.ReportMetric(row.ratio("hub", "floor"), "hub/floor")
			b.ReportMetric(row.ratio("hub", "bare-HTTP"), "hub/bare-HTTP")
			if _, ok := row.p50["Node-RED"]; ok {
				b.ReportMetric(row.ratio("hub", "Node-RED"), "hub/Node-RED")
			}
			rows = append(rows, row)
		})
	}
	printFanout(os.Stdout, rows, redJS)
}

// fanoutTarget is one side of BenchmarkFanout.
type fanoutTarget struct {
	name    string
	put     func(bridge.Command)
	samples mqtttest.Samples
	// mallocs counts the allocations in the process (the target's and its
	// plugs', which are the same for every target) during its blocks.
	mallocs uint64
}

// fanoutTargets starts the four targets, each with its own n plugs, and
// returns them in the order of the table; Node-RED only with redJS.
func fanoutTargets(b *testing.B, broker string, n int, redJS string) []*fanoutTarget {
	b.Helper()
	put := func(name string, c *daemontest.BareClient) func(bridge.Command) {
		return func(cmd bridge.Command) {
			if status, body := c.Command(b, string(cmd)); status != http.StatusNoContent {
				b.Fatalf("%s: PUT %s = %d %s", name, cmd, status, body)
			}
		}
	}
	// Every goroutine a target starts (its server, its MQTT client's reader
	// and writer, the goroutines of its requests) inherits the target's
	// profiler label, and the plugs' have theirs, so a -cpuprofile of this
	// benchmark splits by side: go tool pprof -tagfocus side=hub.
	side := func(name string, fn func()) {
		pprof.Do(context.Background(), pprof.Labels("side", name), func(context.Context) { fn() })
	}
	fleet := func(name string) (topics, ids, switches []string) {
		side("plugs", func() { topics, ids, switches = mqtttest.Fleet(b, broker, name, n) })
		return topics, ids, switches
	}
	var targets []*fanoutTarget

	floorTopics, _, _ := fleet("floor")
	side("floor", func() {
		floor := mqtttest.NewFloor(b, broker, floorTopics)
		targets = append(targets, &fanoutTarget{name: "floor", put: func(cmd bridge.Command) {
			floor.Switch(b, strings.ToUpper(string(cmd)), 5*time.Second)
		}})
	})

	bareTopics, _, _ := fleet("bare")
	side("bare-HTTP", func() {
		bare := daemontest.DialBare(b, mqtttest.StartBareHTTP(b, broker, bareTopics), "")
		targets = append(targets, &fanoutTarget{name: "bare-HTTP", put: put("bare-HTTP", bare)})
	})

	_, ids, sws := fleet("hub")
	side("hub", func() {
		var logger *slog.Logger
		if *fanoutLog {
			f, err := os.Create(filepath.Join(b.TempDir(), "hub.log"))
			if err != nil {
				b.Fatal(err)
			}
			// As serve logs: through the log buffer (asynclog).
			w := asynclog.New(f, 0)
			b.Cleanup(func() { w.Close(); f.Close() })
			logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		h := startE2ELogged(b, logger, "broker: "+broker+"\nclient_id: bench-hub", sws...)
		hub := daemontest.NewBareClient(b, h.grant(b, ids...))
		targets = append(targets, &fanoutTarget{name: "hub", put: put("hub", hub)})
	})

	if redJS != "" {
		nrTopics, _, _ := fleet("nodered")
		nr := daemontest.DialBare(b, mqtttest.StartNodeRED(b, redJS, broker, nrTopics), "")
		targets = append(targets, &fanoutTarget{name: "Node-RED", put: put("Node-RED", nr)})
	}
	return targets
}

// fanoutRow is one N of the table.
type fanoutRow struct {
	n        int
	requests int
	p50, p99 map[string]time.Duration
	allocs   []string // "<target> <allocations per request>"
}

func (r fanoutRow) ratio(a, b string) float64 {
	return float64(r.p50[a]) / float64(r.p50[b])
}

// printFanout writes the table, the machine and whether the targets of
// issue 13 are met.
func printFanout(w *os.File, rows []fanoutRow, redJS string) {
	if len(rows) == 0 {
		return
	}
	nr := redJS != ""
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "\nfan-out, p50 of %d requests per cell; %s/%s, %d CPUs, %s, load %s",
		rows[0].requests, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	if nr {
		fmt.Fprintf(w, ", Node-RED %s, %s", mqtttest.NodeREDVersion(redJS), nodeVersion())
	}
	fmt.Fprintln(w)
	head := "| N | floor p50 / p99 | bare-HTTP p50 / p99 | hub p50 / p99 |"
	sep := "|---|---|---|---|"
	if nr {
		head += " Node-RED p50 / p99 |"
		sep += "---|"
	}
	head += " hub/floor | hub/bare-HTTP |"
	sep += "---|---|"
	if nr {
		head += " hub/Node-RED |"
		sep += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	both := func(r fanoutRow, name string) string { return ms(r.p50[name]) + " / " + ms(r.p99[name]) }
	metBare, metNR := true, true
	for _, r := range rows {
		line := fmt.Sprintf("| %d | %s | %s | %s |", r.n, both(r, "floor"), both(r, "bare-HTTP"), both(r, "hub"))
		if nr {
			line += " " + both(r, "Node-RED") + " |"
		}
		line += fmt.Sprintf(" %.2f | %.2f |", r.ratio("hub", "floor"), r.ratio("hub", "bare-HTTP"))
		if nr {
			line += fmt.Sprintf(" %.2f |", r.ratio("hub", "Node-RED"))
			metNR = metNR && r.p50["hub"] <= r.p50["Node-RED"]
		}
		metBare = metBare && r.ratio("hub", "bare-HTTP") <= 1.1
		fmt.Fprintln(w, line)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "N=%d allocations per request in this process (target + its plugs): %s\n", r.n, strings.Join(r.allocs, ", "))
	}
	fmt.Fprintf(w, "target hub ≤ 1.1× bare-HTTP at every N: %s\n", yesNo(metBare))
	if nr {
		fmt.Fprintf(w, "target hub ≤ Node-RED at every N: %s\n", yesNo(metNR))
	}
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "node ?"
	}
	return "node " + strings.TrimSpace(string(out))
}

// parseCounts reads -fanout.n.
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("-fanout.n %q: want plug counts from 1 to 1000, comma-separated", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
