package mqtt

import (
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// On an external broker too the hub commands at QoS 0 (see qos): a
// subscriber asking for QoS 1 gets its command at 0, so the broker sent
// no PUBACK for it.
func TestExternalBrokerHubUsesQoS0(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	d := openDriver(t, "broker: "+broker.URL, `id: tas, name: Tas, profile: tasmota, topic: tas1`)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("observer"))
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	eventually(t, 5*time.Second, "the hub connected", func() bool { return d.c.IsConnectionOpen() })
	if q := commandQoS(t, d, c); q != 0 {
		t.Errorf("the hub's command arrived at QoS %d, want 0", q)
	}
}

// commandQoS has observer subscribe to plug tas1's commands at QoS 1,
// makes d publish one, and returns the QoS it arrived at: the lower of the
// hub's and the subscription's.
func commandQoS(t *testing.T, d *driver, observer paho.Client) byte {
	t.Helper()
	got := make(chan byte, 1)
	if tok := observer.Subscribe("cmnd/tas1/#", 1, func(_ paho.Client, m paho.Message) {
		select {
		case got <- m.Qos():
		default:
		}
	}); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if tok := d.publish(message{topic: "cmnd/tas1/POWER", payload: []byte("ON")}); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case q := <-got:
		return q
	case <-time.After(3 * time.Second):
		t.Fatal("the hub's command did not arrive")
	}
	return 0
}
