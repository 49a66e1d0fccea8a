package daemon_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestClientValuesInLogLinesAreCapped: values a client sends before it is
// authenticated (an installation id in the path, a hub id at the link's
// login, an MQTT client id and topic) reach the log capped: a request of
// many kilobytes writes a line of a few hundred bytes, not its size.
func TestClientValuesInLogLinesAreCapped(t *testing.T) {
	logs := &logtest.Buffer{}
	mqttAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := daemontest.StartWith(t, daemontest.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Config: fmt.Sprintf(`mqtt:
  broker: embedded
  listen: %s
  users:
    plug: {password: s3cret, switches: [tas]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: Tasmota plug, driver: mqtt, profile: tasmota, topic: tas1}
`, mqttAddr)})
	huge := strings.Repeat("x", 11<<10)

	// An installation id of 11 KB with a token the hub does not know.
	req, _ := http.NewRequest(http.MethodGet, h.URL+"/api/apps/installations/"+huge+"/switches", nil)
	req.Header.Set("Authorization", "Bearer bogus")
	do(t, req, http.StatusUnauthorized)
	// A hub id of 11 KB at the link's login.
	req, _ = http.NewRequest(http.MethodPut, h.URL+link.InventoryPath, strings.NewReader("{}"))
	req.SetBasicAuth(huge, "wrong")
	do(t, req, http.StatusUnauthorized)
	// An MQTT client id of 8 KB publishing where its login may not, on a
	// topic of 8 KB.
	c, err := net.DialTimeout("tcp", mqttAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(mqtttest.Connect(4, strings.Repeat("c", 8<<10), "plug", "s3cret"))
	c.Write(mqtttest.Packet(0x30, append(mqtttest.String("tele/"+strings.Repeat("t", 8<<10)), "x"...)))
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
	c.Close()

	want := []string{"api request", "refused a hub's credentials", "MQTT client refused"}
	for deadline := time.Now().Add(10 * time.Second); ; {
		missing := ""
		for _, w := range want {
			if !strings.Contains(logs.String(), w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line in the log:\n%.3000s", missing, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 1500 {
			t.Errorf("a %d-byte log line: %.300s…", len(line), line)
		}
	}
}

func do(t *testing.T, req *http.Request, want int) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %.60s… answered %d, want %d", req.Method, req.URL.Path, resp.StatusCode, want)
	}
}
