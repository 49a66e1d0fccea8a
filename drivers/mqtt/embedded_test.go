package mqtt

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/sys/unix"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

func TestEmbeddedBrokerLogins(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := startHub(t, hubConfig("broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`))

	connect := func(user, pass string) error {
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("login-" + user + pass).SetUsername(user).SetPassword(pass)
		o.SetConnectTimeout(2 * time.Second)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(3 * time.Second) {
			return fmt.Errorf("no CONNACK")
		}
		if tok.Error() == nil {
			c.Disconnect(0)
		}
		return tok.Error()
	}
	if err := connect("plug", "s3cret"); err != nil {
		t.Errorf("configured login refused: %v", err)
	}
	for _, bad := range [][2]string{{"plug", "wrong"}, {"", ""}, {"nobody", "s3cret"}, {"switchbridge-hub", ""}} {
		if err := connect(bad[0], bad[1]); err == nil {
			t.Errorf("login %q/%q accepted", bad[0], bad[1])
		}
	}
	// The hub's own client got in with its generated login.
	eventually(t, 3*time.Second, "hub connected to its broker", func() bool { return h.state(t, "esp").Available })
}

func TestEmbeddedBrokerBindError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := New(testEnv(t, "{broker: embedded, listen: \""+l.Addr().String()+"\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(context.Background()); err == nil {
		d.Close()
		t.Fatal("Open succeeded on a port in use")
	}
}

// The embedded broker's connections have Nagle's algorithm off, or every
// confirmation would wait ~40 ms on the client's delayed ACK.
func TestEmbeddedBrokerNoDelay(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := noDelayListener{raw}
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", raw.Addr().String()); err == nil {
			time.Sleep(200 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := sc.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if v == 0 {
		t.Error("TCP_NODELAY is off on an accepted connection")
	}
}
