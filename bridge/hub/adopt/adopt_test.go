package adopt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/adopt"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// devices is a hub's store of what it discovered and of the broker's
// client ids.
type devices struct {
	list  []bridge.DiscoveredDevice
	bound map[string]string
}

func (d *devices) DiscoveredDevices(context.Context) ([]bridge.DiscoveredDevice, error) {
	return append([]bridge.DiscoveredDevice(nil), d.list...), nil
}

func (d *devices) MQTTClientIDLogin(_ context.Context, id string) (string, error) {
	return d.bound[id], nil
}

func (d *devices) BindMQTTClientID(_ context.Context, id, login string, _ time.Time, take bool, _ int) (string, error) {
	if d.bound[id] == "" || take {
		d.bound[id] = login
	}
	return d.bound[id], nil
}

const hubConfig = `server: {listen: "127.0.0.1:0", metrics_listen: "off"}
data_dir: %s
mqtt:
  broker: embedded
  listen: 127.0.0.1:0
  users:
    hall: {password: s1, switches: [hall]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: hall, name: Hall, driver: mqtt, profile: tasmota, topic: tas_hall}
`

// TestAdopt: the refusals carry the codes the console shows them by and
// leave the file as it was; an adoption passes the check-config checks
// (CheckFile) and binds the device's client id to its new login.
func TestAdopt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	original := fmt.Sprintf(hubConfig, filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(original), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &devices{bound: map[string]string{}, list: []bridge.DiscoveredDevice{
		{ID: "tasmota-1", Firmware: "tasmota", Entry: "{id: kitchen, name: Kitchen, driver: mqtt, profile: tasmota, topic: tas_kitchen}", ClientID: "DVES_tas_kitchen"},
		{ID: "tasmota-2", Firmware: "tasmota", Entry: "{id: hall-plug, name: Hall plug, driver: mqtt, profile: tasmota, topic: tas_hall}"},
		{ID: "tasmota-3", Firmware: "tasmota", Entry: "{id: broken, name: Broken, driver: mqtt, profile: tasmota}"},
	}}
	o := adopt.Options{Store: st, Registry: builtin.Registry()}
	for _, tt := range []struct {
		req  adopt.Request
		code string
	}{
		{adopt.Request{Device: "tasmota-9", Location: 1}, bridge.ENOTFOUND},
		{adopt.Request{Device: "tasmota-2", Location: 1}, bridge.ECONFLICT},
		{adopt.Request{Device: "tasmota-1", Location: 7}, bridge.EINVALID},
		{adopt.Request{Device: "tasmota-1", Location: 1, ID: "hall"}, bridge.ECONFLICT},
	} {
		if _, err := adopt.Adopt(context.Background(), cfg, tt.req, o); bridge.ErrorCode(err) != tt.code {
			t.Errorf("%+v: %v, want code %s", tt.req, err, tt.code)
		}
	}
	if _, err := adopt.Adopt(context.Background(), cfg, adopt.Request{Device: "tasmota-3", Location: 1}, o); !config.IsProblems(err) || !strings.Contains(err.Error(), `switch "broken"`) {
		t.Errorf("an entry that builds no plug: %v, want check-config's problems", err)
	}
	if b, _ := os.ReadFile(path); string(b) != original {
		t.Fatalf("a refused adoption changed the file:\n%s", b)
	}

	a, err := adopt.Adopt(context.Background(), cfg, adopt.Request{Device: "tasmota-1", Location: 1, Name: "Kitchen light"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if a.SwitchID != "kitchen" || a.Login != "kitchen" || len(a.Password) != 22 || a.Backup != path+".bak" || a.ClientID != "DVES_tas_kitchen" || a.Unbound != nil {
		t.Errorf("adopted %+v", a)
	}
	if st.bound["DVES_tas_kitchen"] != "kitchen" {
		t.Errorf("the device's client id is bound to %q, want its new login", st.bound["DVES_tas_kitchen"])
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{"      - {id: kitchen, name: Kitchen light, driver: mqtt, profile: tasmota, topic: tas_kitchen}\n",
		"    kitchen: {password: " + a.Password + ", switches: [kitchen]}\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the adopted file has no %q:\n%s", want, b)
		}
	}
	if _, _, err := adopt.CheckFile(path, builtin.Registry()); err != nil {
		t.Errorf("the adopted file does not pass: %v", err)
	}
}
