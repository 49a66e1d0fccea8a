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
	"runtime/trace"
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
//     HTTP at all. Its client is set up as the hub's driver sets up its
//     own: replies handled in paho's router goroutine, the connection
//     read through a buffer (without one, paho makes three read(2) a
//     packet; the hub never did).
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
// Method. Each target has a Mosquitto of its own on a free loopback port,
// all with set_tcp_nodelay true, and its own fleet of N simulated plugs
// (mqtttest.Fleet, in this process), so none handles another's traffic
// while it is timed. (Until issue 23 the targets shared one Mosquitto,
// where the wildcard subscriptions of the floor, bare-HTTP and Node-RED
// took every target's replies: during the hub's turn, the other three
// handled its N plugs' replies too.) The HTTP targets are called over one
// kept-alive connection by the same bare HTTP/1.1 client
// (daemontest.DialBare). Targets take turns in blocks of
// mqtttest.BenchBlock requests, the order rotating every round, so all
// run under the same load; -fanout.requests (200) timed requests per
// target after one warm-up block; p50 of single requests. Absolute times
// move with the machine's load, the ratios much less: compare within one
// run.
//
// The trace of a run splits by side: `go test -run '^$' -bench
// '^BenchmarkFanout$' -benchtime 1x -fanout.n=1 -fanout.nodered=false
// -trace t.out ./bridge/daemon`. Each target is started inside a region
// "side <name>" (the goroutines it starts are its own; those they start
// in turn too) and each block of requests runs in a region "block
// <name>", so a reader of the trace (golang.org/x/exp/trace) can follow
// one request through the goroutines of its side.
//
// Measured on 2026-11-25, night, with the floor's and bare-HTTP's client
// reading through a buffer as the hub's does (above), `make bench
// BENCH_REQUESTS=400`, a fresh 2-vCPU AMD EPYC VM (Linux 6.18, Go 1.26.8,
// Mosquitto 2.0.11, Node-RED 4.1.15 on Node 20.20; load average 1–2.3
// from other work), three runs (p50 / p99, ms; hub/bare-HTTP and
// hub/Node-RED of the p50s):
//
//	| N   | floor                          | bare-HTTP                      | hub                            | Node-RED                       | hub/bare-HTTP    | hub/Node-RED     |
//	| 1   | 0.17/0.38 0.17/0.45 0.14/0.28  | 0.24/0.46 0.26/0.57 0.21/0.39  | 0.32/0.71 0.32/1.38 0.27/0.54  | 0.92/5.87 1.03/3.88 0.80/3.37  | 1.33, 1.25, 1.29 | 0.35, 0.31, 0.34 |
//	| 10  | 0.57/2.50 0.65/2.55 0.59/2.60  | 0.62/2.82 0.66/2.73 0.62/1.67  | 0.81/2.44 0.88/2.80 0.79/2.87  | 1.69/6.24 1.77/6.20 1.58/5.86  | 1.31, 1.33, 1.28 | 0.48, 0.50, 0.50 |
//	| 100 | 4.53/12.7 4.79/13.4 4.47/12.2  | 4.47/12.7 4.72/13.3 4.33/12.9  | 5.79/13.8 6.09/16.7 5.71/15.0  | 7.42/16.3 7.95/17.8 7.45/16.5  | 1.30, 1.29, 1.32 | 0.78, 0.77, 0.77 |
//
// The hub is ahead of the Node-RED flow at every N (target met) and
// 1.25–1.33 times the bare handler (target of 1.1 missed). The same hour
// with the unbuffered references of before gave hub/bare-HTTP 1.24,
// 1.24, 1.25 at N = 1, 1.21, 1.24, 1.26 at N = 10 and 1.21, 1.23, 1.19
// at N = 100: the read buffer was worth 0.03–0.10 to the references, the
// most at N = 100, where a reply is read in one system call instead of
// three.
//
// Again late that night on a 2-vCPU Oxide VM (about twice as slow in
// absolute terms; load average 1.5–3.9, other benchmarks running), the
// same command, three runs (p50, ms, floor / bare-HTTP / hub / Node-RED;
// hub/bare-HTTP, hub/Node-RED): N = 1 0.35/0.47/0.58/2.15, 0.33/0.47/0.62/2.25,
// 0.33/0.46/0.59/1.82 (1.24, 1.33, 1.30; 0.27, 0.27, 0.33); N = 10
// 1.62/1.75/2.23/4.57, 1.43/1.50/1.94/3.71, 1.37/1.51/1.87/3.59 (1.27,
// 1.30, 1.24; 0.49, 0.52, 0.52); N = 100 12.0/12.1/15.9/17.4,
// 11.0/11.7/14.2/16.5, 11.6/11.7/14.9/17.5 (1.31, 1.22, 1.27; 0.91,
// 0.86, 0.85). The ratios hold across the two machines.
//
// # Latency at N = 1, by segment (issue 23)
//
// Where the hub's request spends the time the bare handler does not,
// read from a trace of this benchmark (above; 400 requests per side,
// medians; a traced run is slower throughout, so the segments are
// compared with each other, not with the table). A request at the
// server: from its connection's goroutine woken with the request, to the
// command's publish written to the broker, to the reply read, to the
// handler woken with it, to the response written:
//
//	| segment                                   | bare-HTTP | hub   | hub − bare |
//	| request in → publish written              | 18.3      | 33.2  | +14.9      |
//	| publish written → reply read (broker, plug) | 97.9    | 83.4  | −14.5      |
//	| reply read → handler woken                | 7.4       | 11.9  | +4.5       |
//	| handler woken → response written          | 8.4       | 18.1  | +9.7       |
//	| total, µs                                 | 149.9     | 173.9 | +24.0      |
//
// The broker-and-plug segment is the same work for both and moves by
// ±15 µs from run to run (Mosquitto is another process on the same two
// CPUs); the other three are the hub's own, about 29 µs on this traced
// run. One request of each, step by step: before the publish, the hub
// spends 14.7 µs from reading the request to its access check (routing,
// the rate limit, the bearer check and the grant cache; the bare handler
// 6.5 µs to its publish), 3.3 µs in the access check's fstat and pread,
// 6.7 µs in the switchboard and the driver, 3 µs handing the command to
// the driver's publisher and getting its token back, then paho's own two
// goroutine hops to its writer, as the bare handler's; after the reply,
// paho's four hops (reader, incoming, comms, router) as for the bare
// handler, then the driver's report handling; after the wake, the
// journal append (one write(2), 2.3 µs) and the 204 with the hub's
// headers. The hub's connection goroutine is put on a CPU 10.8 times a
// request against 6.0 (three system calls more: fstat, pread, the
// journal's write; two wake-ups more: the publisher's token, then its
// completion) and, after the response, spends 12–15 µs formatting the
// two log lines before it reads the next request (2.4 µs for the bare
// handler): in this closed loop that delays the next request when its
// client is quicker.
//
// That cut was built and measured (2026-11-25, late night, an Oxide
// 2-vCPU VM, load average below 1): the lines' records queued as they
// were logged and formatted by the log buffer's goroutine every 50 ms,
// beside the same hub formatting at once, both in one BenchmarkFanout
// (three interleaved runs, 1,600 requests a cell; p50 µs, queued /
// at once): N = 1 397/379, 404/382, 476/472; N = 10 1582/1512,
// 1476/1440, 1720/1697. Queued was 1–5 % slower every time: the client
// takes longer to turn round than the formatting does, so the next
// request found the connection's goroutine reading already, and the
// formatting moved to another goroutine competed with the requests for
// the two CPUs instead of filling the client's turn. Not kept.
//
// Measured on 2026-11-25, evening, after issue 23's cuts and with a
// Mosquitto per target, `make bench BENCH_REQUESTS=400`, the 2-vCPU AMD
// EPYC VM of the CPU section below (load average 3–4 from other work),
// Node-RED 4.1.15 on Node 20.20, three runs (p50 / p99, ms; hub/bare-HTTP
// and hub/Node-RED of the p50s):
//
//	| N   | floor                       | bare-HTTP                   | hub                         | Node-RED                    | hub/bare-HTTP    | hub/Node-RED     |
//	| 1   | 0.13/0.59 0.11/0.21 0.10/0.30 | 0.20/0.46 0.14/0.37 0.13/0.32 | 0.24/1.19 0.19/0.46 0.17/0.48 | 0.79/5.46 0.62/4.15 0.62/3.55 | 1.19, 1.33, 1.31 | 0.30, 0.30, 0.28 |
//	| 10  | 0.55/2.34 0.46/1.77 0.42/2.48 | 0.59/2.99 0.48/2.98 0.48/2.08 | 0.76/2.91 0.60/2.46 0.54/2.11 | 1.42/5.44 1.12/5.71 1.14/5.50 | 1.29, 1.25, 1.13 | 0.53, 0.53, 0.48 |
//	| 100 | 3.91/10.8 3.51/10.9 3.47/10.1 | 3.93/12.3 3.43/11.2 3.27/10.9 | 4.84/13.5 4.06/11.1 4.12/10.7 | 5.81/16.5 5.33/13.0 5.41/12.7 | 1.23, 1.18, 1.26 | 0.83, 0.76, 0.76 |
//
// The hub is ahead of the Node-RED flow at every N (target met) and
// 1.13–1.33 times the bare handler (target of 1.1 missed). On the shared
// Mosquitto of before, the same hour gave hub/Node-RED at N = 100 of
// 1.07, 1.09, 1.03 with these cuts and 1.16, 1.10 at 2a9e087 without
// them, and hub/bare-HTTP 1.29–1.67 at N = 1: the other targets' wildcard
// subscriptions handling the hub's replies during its turn cost it more
// than they cost each other.
//
// Earlier that day, before those cuts, on one shared Mosquitto, against
// the references above, `make bench BENCH_REQUESTS=200`, on the 2-vCPU AMD
// EPYC VM (load average 1.2–2 from other work), Go 1.26.8, Mosquitto
// 2.0.11, Node-RED 4.1.15 on Node 20.20, the hub logging through its log
// buffer and commanding at QoS 0:
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
// History (issue 13, before the log buffer, QoS 0 and the stronger
// references; the CPU section below supersedes it). Where the hub's time
// went: CPU per request from a profile with the side
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
// # CPU per command at N = 1, by component (issue 23)
//
// BenchmarkCPUPerCommand (cmd/switchbridge) is the target's figure: the
// real hub (serve, built as make dist builds it) and the bare handler, each
// a process of its own switching one plug, CPU time (user + system, every
// thread, from /proc/PID/task/*/schedstat) over whole rounds, so what a
// command leaves for later (the log buffer's write every 50 ms, the
// values' write-behind every 500 ms) counts too. BenchmarkCPUComponents
// (`make bench-components`) splits it: the hub from the test binary once
// whole (full) and once without each component (ablation), interleaved
// with the bare handler and serve; -components.baseline adds other
// revisions or binaries (before and after, or a next cut, in the same
// run); -components.cpuprofile adds the profile split.
//
// Machine: nproc 2, /proc/cpuinfo model name "AMD EPYC" (2.6 GHz, a VM
// without hardware performance counters), Linux 6.18, Go 1.26.8,
// Mosquitto 2.0.11. Other builds, tests and benchmarks ran on the same two
// cores all along (load average 1–9), so every figure is CPU time, never
// wall time, and every comparison is within one interleaved run. Measured
// 2026-11-25.
//
// Method (BenchmarkCPUComponents). Every side is a process of its own
// with its own simulated Tasmota plug, data directory and installation;
// the hubs share one Mosquitto, the bare handler has its own (its
// stat/+/RESULT subscription would take every plug's replies). Each run
// starts all processes afresh, in an order drawn anew, and draws which
// plug, data directory and ports each hub gets, so that nothing but what
// it runs stays with a side from run to run. In each round every side
// sends one block of mqtttest.BenchBlock commands, in an order drawn
// every round; every process's CPU is read at every round's end; a difference between two sides is the mean of
// their round-by-round differences, ± its 95 % interval. 20,000
// commands per side and run, three runs. Resolution: a control side
// identical to another (daemon beside full, a copy of serve's binary
// beside serve) still differed by −7 to +15 µs in a run, so differences
// under about 5 µs over three runs are not resolved, and what is in the
// tables below as "≤ n" is no more than that.
//
// The target's figure after this cuts (make bench,
// BenchmarkCPUPerCommand, 2,000 commands each, µs; within own blocks in
// brackets): bare-HTTP 98.3 (94.1), 90.0 (85.3), 97.3 (93.6); hub 131.7
// (124.7), 143.8 (130.5), 148.7 (140.5); hub/bare 1.34, 1.60, 1.53:
// the target of 1.3 is not met. (197 against 117 µs, 1.69, before, then
// counted within each side's own blocks and with the bare handler on the
// hub's broker.)
//
// The same figure on a fresh VM of the same kind that night (everything
// costs about 1.5 times what it cost on the first; compare ratios): bare-HTTP
// 144.1, 146.2, 151.7 and hub 225.5, 228.6, 231.3 µs, hub/bare 1.56,
// 1.56, 1.52; with the bare handler's client reading through a buffer as
// the hub's does (Floor, above), bare-HTTP 155.9, 148.4, 153.8 and hub
// 246.8, 233.4, 242.7, hub/bare 1.58, 1.57, 1.58 (one reply a command: the
// buffer saves the bare handler two read(2) a command, within the noise).
//
// The serve binary's extra cost (the last row of the table below),
// narrowed that night with BenchmarkCPUComponents, -components.baseline
// naming binaries built for the purpose, three runs of 10,000 commands
// each unless said (µs a command against serve; within ±4 is noise, as a
// byte-identical copy of serve's binary came out −6.4 to +6.6 against it):
// serve spent 6.8–23.0 µs a command more than the test binary's hub
// (full) in every run (mean 12.8 over eighteen runs). Not the build: a
// binary without -trimpath and -s -w measured as serve (−1.7, −0.2,
// −4.3, and −2.0 in a fourth run), one with cgo a little below it (−6.6,
// −3.3, −7.9), but the test binary, built with cgo, ran serve no cheaper
// (below). Not the
// garbage collector: serve, full and the daemon variant each collected
// 32–34 times in a run of 10,000 commands (GODEBUG=gctrace=1), about 1 ms
// of CPU each, 2.5–3.5 µs a command, the live heap 1 MB under the 4 MB
// floor. Not the binary's layout: the test binary running serve's own
// main (SWITCHBRIDGE_RUN_MAIN=1) measured as serve (+5.2, +0.5, −0.9;
// +0.9, +1.4, +4.2), not as full. Not what serve does around the daemon:
// serve without the memory limit (+2.6, +1.6, −1.1), without its watchdog
// and reload goroutines and the dropped-lines counter (+3.0, +4.7, +0.9),
// without main's signal relay (+2.8, +2.3, −4.4), without the start-up
// log lines and their flushes (+0.1, +4.7, +2.0), without sd_notify
// (+1.4, −2.3, +3.7). What is left is the path from main through the
// command table to serve against the benchmark's direct call of
// daemon.Open and Daemon.Serve (the daemon variant, ≈ full): the same
// code once the daemon runs, so a difference in where start-up left the
// heap, stacks and threads is the likeliest, and it is not found. Under
// perf at equal sampling overhead (the test binary, its serve against its
// daemon variant, 20 s of the same commands) the two spent 2.68 and
// 2.72 s of CPU: there the gap did not show at all.
//
// Found later that night: the gap was the benchmark's, not serve's. The
// bare handler and every variant ran from one file, the test binary,
// and processes of one file share its pages in the page cache, so its
// code and read-only data in the CPU's caches: a variant whose block
// followed another variant's found the hub's code cached; serve, and
// every -components.baseline binary, each a file of its own, did not.
// Under perf both sides ran from the test binary; the test binary running
// main had measured as serve because it ran as a baseline, a file apart.
// BenchmarkCPUComponents, 5,000 commands, three runs each, side − full
// in µs a command (±12 to ±16). All sides on the test binary, as before:
// serve +42.4, +49.1, +38.8; +30.4, +34.3, +45.9; +32.9, +16.8, +47.7;
// beside it the test binary running main (SWITCHBRIDGE_RUN_MAIN=1) came
// out as full (+0.2, +4.9, +4.6), and so did main's run called directly
// and the daemon variant with main's signal set-up and relay. The last
// two run from copies of the test binary of their own rose towards serve
// (+9.8, +24.5, +12.0 and +2.6, +29.5, +6.6; serve +12.7, +39.6, +22.7;
// the daemon variant, still on the shared file, −11.2, +2.7, −6.8). The
// gap moves with the file, not the code: full and two variants on one
// file (hard links), the daemon variant on a copy of its own, serve
// +28.1, +25.7, +25.1, daemon +21.0, +9.9, +31.2, the linked ones −1.7,
// +10.1, +0.1 and −9.7, −2.9, +2.4. Every side from a file of its own
// (ownCopy, since): serve −2.1, −1.5, +1.0 and +6.5, −15.2, −20.7, the
// daemon variant −5.3, −2.9, −7.2 and +6.4, −9.8, +3.6, a build of the
// same code as serve (-components.baseline=main) +3.1, −1.5, +5.3
// against serve. The ablation below is from before: its sides all shared
// the file, so its differences hold as far as each gained alike, and its
// figures for full and the variants are low by about serve's old gap.
//
// Ablation with every side from a file of its own (late that night, the
// 2-vCPU Oxide VM of the second fan-out table, where everything costs
// about 3.3 times what it did on the first VM; 10,000 commands a side and
// run, three runs; the side's µs a command [of which sysmon] and threads
// put on a CPU a command, then full − side ± 95 %: what leaving the part
// out saved):
//
//	| side          | run 1                          | run 2                          | run 3                           |
//	| bare-HTTP     | 334.7 [60.2] 10.2: 209.4 ± 10.8 | 352.7 [62.6] 10.4: 210.5 ± 11.4 | 402.8 [72.8] 10.8: 265.2 ± 13.7 |
//	| serve         | 543.2 [88.8] 13.8: 0.9 ± 10.6   | 568.2 [92.0] 14.1: −5.0 ± 11.5  | 662.6 [110.1] 14.9: 5.4 ± 13.6  |
//	| full          | 544.1 [88.0] 13.6               | 563.2 [92.5] 13.8               | 668.0 [110.1] 14.9              |
//	| daemon        | 535.9 [87.4] 13.5: 8.2 ± 11.2   | 555.6 [90.7] 13.8: 7.6 ± 12.7   | 655.9 [108.3] 14.7: 12.1 ± 13.7 |
//	| no-log        | 505.5 [75.4] 12.8: 38.6 ± 11.0  | 527.3 [79.6] 13.0: 35.9 ± 11.9  | 601.0 [91.9] 13.7: 67.0 ± 14.6  |
//	| log-unwritten | 513.5 [77.7] 12.7: 30.6 ± 10.8  | 530.9 [78.7] 12.9: 32.4 ± 12.1  | 621.8 [95.5] 13.7: 46.2 ± 13.4  |
//	| no-access     | 514.0 [85.6] 13.2: 30.1 ± 11.0  | 538.9 [89.8] 13.5: 24.3 ± 13.0  | 627.0 [105.0] 14.3: 41.0 ± 14.3 |
//	| no-journal    | 514.1 [85.3] 13.2: 30.0 ± 10.3  | 543.4 [90.6] 13.6: 19.9 ± 13.1  | 636.2 [106.7] 14.5: 31.8 ± 14.4 |
//	| no-metrics    | 535.8 [88.6] 13.6: 8.2 ± 11.9   | 550.6 [90.1] 13.8: 12.6 ± 11.4  | 650.2 [108.3] 14.6: 17.8 ± 14.2 |
//	| no-ratelimit  | 536.3 [91.0] 13.6: 7.8 ± 12.9   | 560.7 [92.3] 13.7: 2.5 ± 12.5   | 655.7 [109.5] 14.8: 12.3 ± 14.0 |
//	| no-feed       | 534.4 [87.4] 13.5: 9.7 ± 11.6   | 552.4 [90.7] 13.8: 10.8 ± 12.1  | 660.4 [109.9] 14.8: 7.5 ± 14.3  |
//
// serve now measures as full. Scaled by this machine's 3.3, the parts
// keep their proportions from the table below but for the log lines,
// whose writing (full − log-unwritten) costs more here: handing the
// lines to the log buffer wakes its goroutine for the first line after
// each write-out, and in this benchmark a side's block of commands is
// over before the 50 ms are, so every block pays one wake-up, one timer
// and one write(2), with the sysmon polling a thread woken from idle
// brings (sysmon 88.0 against 77.7 µs a command, threads 13.6 against
// 12.7 in run 1). A hub commanded now and then pays the same once a
// command; one under steady load, once in 50 ms. Waiting for it on the
// request's goroutine instead is what the issue rules out. Together the
// parts that can be left out come to 120–170 µs of full − bare-HTTP's
// 210–265; the rest is what every command needs (the profile split
// below).
//
// The earlier ablation, its sides sharing the test binary's file (above),
// three runs (µs per command: the side's, then full − side
// ± 95 %: what leaving the part out saved), `make bench-components`:
//
//	| side          | left out                                                      | run 1               | run 2               | run 3               |
//	| bare-HTTP     | (the bare handler)                                            | 104.9: 61.9 ± 2.9   | 103.3: 66.8 ± 3.2   | 89.9: 58.8 ± 3.0    |
//	| serve         | nothing (the make dist binary)                                | 194.9: −28.1 ± 3.6  | 193.7: −23.7 ± 7.1  | 172.3: −23.5 ± 3.4  |
//	| full          | nothing (the test binary's hub)                               | 166.8               | 170.0               | 148.8               |
//	| daemon        | nothing, served by Daemon.Serve (control)                     | 167.1: −0.3 ± 3.3   | 170.6: −0.6 ± 3.4   | 150.8: −2.0 ± 3.5   |
//	| no-log        | both info lines (not formatted, not written)                  | 155.9: 10.9 ± 3.5   | 155.8: 14.3 ± 3.5   | 141.2: 7.6 ± 3.5    |
//	| log-unwritten | writing them (formatted into io.Discard)                      | 166.6: 0.2 ± 3.4    | 155.4: 14.6 ± 3.5   | 144.9: 3.9 ± 3.4    |
//	| no-access     | the access check (grant read once, then reused)               | 159.7: 7.1 ± 3.5    | 163.1: 6.9 ± 3.7    | 148.3: 0.5 ± 3.5    |
//	| no-journal    | the journal append before the 204                             | 157.9: 8.9 ± 3.3    | 158.3: 11.8 ± 4.7   | 145.0: 3.8 ± 3.7    |
//	| no-metrics    | Metrics.Instrument and Switchboard.Observe                    | 167.6: −0.8 ± 3.6   | 165.2: 4.8 ± 3.5    | 147.1: 1.7 ± 3.5    |
//	| no-ratelimit  | the rate limit and its headers                                | 167.1: −0.3 ± 3.6   | 171.1: −1.1 ± 3.8   | 147.5: 1.3 ± 3.6    |
//	| no-feed       | the change feed's part in a command                           | 168.3: −1.5 ± 3.6   | 162.5: 7.6 ± 3.7    | 150.2: −1.5 ± 3.7   |
//
// A second set of three runs, minutes earlier, gave full − variant:
// no-log 15.1, 14.5, 10.6; log-unwritten 4.9, 1.2, 6.6; no-access 5.0,
// 7.1, 7.4; no-journal 9.3, 5.1, 3.6; no-metrics 1.4, −0.5, 2.2;
// no-ratelimit 4.1, −0.5, 2.2; no-feed 0.4, −7.0, −2.5; daemon 0.3,
// −6.6, −0.9; serve 27.3, 26.1, 29.2 beyond full. Over the six runs: the
// log lines 12 µs (their writing 5 of it), the journal 7, the access
// check 6, metrics 1.5, the rate limit 1, the feed 0; together 27 µs of
// the 59–68 µs between full and bare-HTTP. The rest cannot be left out
// and still command a plug: the profile places it.
//
// Profile split (-components.cpuprofile, 30,000 commands, third run;
// µs per command: the run's CPU per command in the shares of the
// process's pprof profile, sysmon's thread measured apart because a
// profile never samples it; see components for what counts where):
//
//	| component                                              | bare-HTTP | full  | full − bare |
//	| log lines (format, log buffer, write)                  | 0.0       | 5.5   | +5.5        |
//	| access check (token, grant cache, access generation)   | 0.0       | 5.4   | +5.4        |
//	| journal append before the 204                          | 0.0       | 2.9   | +2.9        |
//	| values' write-behind (report noted; database)          | 0.0       | 1.0   | +1.0        |
//	| HTTP server I/O (request read, answer write)           | 22.9      | 29.6  | +6.7        |
//	| metrics                                                | 0.0       | 0.8   | +0.8        |
//	| rate limit                                             | 0.0       | 0.5   | +0.5        |
//	| change feed, event streams, webhooks                   | 0.0       | 1.6   | +1.6        |
//	| routing (mux, app path table)                          | 0.8       | 2.5   | +1.7        |
//	| switchboard (lookup, change caps, deadline)            | 0.0       | 3.2   | +3.2        |
//	| command to the plug (driver, paho publish)             | 17.2      | 17.9  | +0.7        |
//	| the plug's reports (paho read and route, driver)       | 17.2      | 20.8  | +3.6        |
//	| API handler (the rest)                                 | 0.3       | 1.6   | +1.3        |
//	| garbage collector                                      | 1.9       | 4.8   | +2.8        |
//	| sysmon (the runtime's monitor thread, measured)        | 18.5      | 23.5  | +5.0        |
//	| HTTP server, MQTT client (the rest), other             | 0.9       | 1.9   | +1.0        |
//	| scheduler (goroutines and threads parked and woken)    | 26.3      | 38.5  | +12.2       |
//	| total                                                  | 105.9     | 161.8 | +55.9       |
//
// Profiles and ablation disagree where a component's cost is mostly in
// what it causes: a system call from an idle process wakes sysmon
// (entersyscallWakeSysmon), which then polls every 20 µs while anything
// runs, and a goroutine handed work wakes a second thread on this 2-vCPU
// machine; the ablation counts that, the profile books it under sysmon
// and the scheduler. Linux checks a thread's CPU timer only at the tick,
// so a profile gets one sample per tick a thread was running (its total
// is about a fifth of the CPU used; the shares hold). The hub's threads
// were put on a CPU 9.9–10.8 times per command, bare-HTTP's 7.7–8.4.
//
// What each remaining part would take. Each next cut measured as a build
// of today's code with the cut, run beside serve and beside a
// byte-identical copy of serve's binary (the control) in the same runs,
// three runs, µs per command saved (against serve / against the control;
// the control itself came out 7.8, 6.2, 15.1 below serve):
//
//	| part (profile, ablation)          | next cut                                                   | saved, µs (serve / control)         | what it costs                               |
//	| scheduler + sysmon (17.2, –)      | GOMAXPROCS=1 (serve, or the unit's Environment=)           | 43.5, 42.3, 53.4 / 35.7, 36.1, 38.3 | one core for the hub; threads put on a CPU per command 10.6–11.1 → 5.6–5.8; the bare handler gains as much (both at GOMAXPROCS=1 earlier: 64 and 111 µs, 1.73), so the ratio does not close; a Pi Zero has one core already |
//	| log lines (5.5, 12)               | one line per command (drop "api request" for a 204)        | 1.2, 2.6, −0.3 / ≤ 0                | not allowed (every documented line stays), and worth ≤ 3 µs |
//	| journal (2.9 + 1.0, 7)            | none: durable before the 204                               | –                                   | –                                           |
//	| access check (5.4, 6)             | the access generation without its fstat and pread a request (bridge/store: e.g. the WAL index mapped) | 5.2, −1.1, 6.1 / ≤ 0          | ≤ 6 µs; revocation at once stays a read of shared memory |
//	| the plug's reports (+3.6, –)      | not subscribing to stat/<topic>/POWER (Tasmota sends it after RESULT) | 7.1, 7.2, 11.3 / −0.7, 1.0, −3.8 | a behaviour change: SetOption4 plugs answer there; ≤ 10 µs |
//	| the command's token (in sched.)   | not waking the command for its publish token (drivers/mqtt) | 4.0, 4.8, 3.6 / ≤ 0               | a late publish failure would be reported as the connection's loss; ≤ 5 µs |
//	| feed, webhooks (1.6, 0)           | no webhook subscription while none is registered (bridge/webhook) | 3.4, 1.7, 1.6 / ≤ 0         | ≤ 3 µs                                      |
//	| garbage collector (2.8, –)        | GOGC=200                                                   | 11.4, 8.3, 17.2 / 3.6, 2.1, 2.1     | the heap grows twice as far between collections (the least goal 4 → 8 MB) under load; idle, the hub hands its heap back, so the idle anonymous target holds (BenchmarkFootprint, GOGC=200 and 100 alternating, median of 3 each: 6.3, 6.5 against 6.7, 6.9 MB); against the control within the resolution |
//	| switchboard (3.2, –)              | no context and confirmation map per command (bridge)       | ≤ 1 (BenchmarkCommandIn, bridge: the whole switchboard part 1.2–1.9 µs and 12 allocations a command, 0.46–0.71 µs and 5 without the deadline's context and the map) | the deadline cannot go; the map is Persist's argument |
//	| routing, API, metrics, rate limit (5.4, 2.5) | –                                              | each ≤ 2 after the cuts below        | –                                           |
//	| HTTP server I/O (+6.7, –)         | none found: net/http's own reading and writing; the hub's answer carries five more headers | –          | –                                           |
//	| the make dist binary (+4 to +29 over the test binary's hub, same code) | profile-guided build (-pgo, a profile of this load) | −3.1, −8.7, −1.3 / worse | did not pay; the gap is spread over all user code (perf: user time +17 %, kernel equal); narrowed above (not the build, GC, layout or serve's own additions); found later: the benchmark's variants shared one file's cached code, serve did not (above) |
//
// Cuts made in this issue (measured against 2a9e087, the revision before
// them, as a baseline in the same runs: it spent 6.6, 9.4, 4.9 µs a
// command more than serve, and 14.4, 15.6, 20.0 more than the control;
// in an earlier set of runs 10.7, 11.8, 9.6 more than serve): no logger made per request
// (the command's line names its installation itself, byte for byte as
// before), the app path cut from the URL rather than split and joined, no
// query parsing without a query, the rate limit's header names
// canonicalized once, the HTTP, command and MQTT message metrics' series
// looked up once and kept, the plugs' on and off messages built once.
// Allocations per request at N = 1 in BenchmarkFanout's process (the
// target and its plugs): hub 245 before, 228 after (bare-HTTP 154). Cuts
// that did not pay: a profile-guided build (above); not waking the
// command for its token, one log line, no webhook subscription (each
// within the resolution, and none of them allowed but the last).
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
			targets := fanoutTargets(b, n, redJS)
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
						trace.WithRegion(context.Background(), "block "+t.name, func() { t.samples.Block(t.put) })
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
func fanoutTargets(b *testing.B, n int, redJS string) []*fanoutTarget {
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
	// benchmark splits by side: go tool pprof -tagfocus side=hub. In a
	// -trace, the region "side <name>" marks the goroutines started for it.
	side := func(name string, fn func()) {
		pprof.Do(context.Background(), pprof.Labels("side", name), func(ctx context.Context) { trace.WithRegion(ctx, "side "+name, fn) })
	}
	// Each target has a Mosquitto of its own, all set up alike: a
	// wildcard subscription (the floor's, bare-HTTP's, Node-RED's) on a
	// shared one would take every target's plugs' replies, the hub's
	// during its turn.
	fleet := func(name string) (broker string, topics, ids, switches []string) {
		broker = mqtttest.StartMosquitto(b).URL
		side("plugs", func() { topics, ids, switches = mqtttest.Fleet(b, broker, name, n) })
		return broker, topics, ids, switches
	}
	var targets []*fanoutTarget

	broker, floorTopics, _, _ := fleet("floor")
	side("floor", func() {
		floor := mqtttest.NewFloor(b, broker, floorTopics)
		targets = append(targets, &fanoutTarget{name: "floor", put: func(cmd bridge.Command) {
			floor.Switch(b, strings.ToUpper(string(cmd)), 5*time.Second)
		}})
	})

	broker, bareTopics, _, _ := fleet("bare")
	side("bare-HTTP", func() {
		bare := daemontest.DialBare(b, mqtttest.StartBareHTTP(b, broker, bareTopics), "")
		targets = append(targets, &fanoutTarget{name: "bare-HTTP", put: put("bare-HTTP", bare)})
	})

	broker, _, ids, sws := fleet("hub")
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
		broker, nrTopics, _, _ := fleet("nodered")
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
