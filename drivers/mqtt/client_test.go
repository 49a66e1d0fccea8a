package mqtt

import (
	"bytes"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// countingConn counts the reads that reach the socket.
type countingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// TestBufferedReads: a burst of reports sent in one write is read whole,
// packet by packet, in a couple of reads of the socket instead of three
// per packet.
func TestBufferedReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var burst bytes.Buffer
	topics := []string{"stat/a/RESULT", "stat/a/POWER", "tele/b/STATE", "stat/c/POWER1"}
	for i, topic := range topics {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.TopicName = topic
		p.Payload = bytes.Repeat([]byte{'x'}, 100*i) // the last one needs two length bytes
		if err := p.Write(&burst); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(burst.Bytes())
		c.Read(make([]byte, 1)) // hold the connection until the reader is done
	}()

	o := paho.NewClientOptions()
	o.Dialer = &net.Dialer{}
	conn, err := dialBuffered(&url.URL{Scheme: "tcp", Host: ln.Addr().String()}, *o)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Count the reads below the buffer (nothing has been read yet).
	bc := conn.(*bufferedConn)
	counted := &countingConn{Conn: bc.Conn}
	bc.Conn = counted
	bc.r.Reset(counted)

	for i, want := range topics {
		cp, err := packets.ReadPacket(conn)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		p, ok := cp.(*packets.PublishPacket)
		if !ok || p.TopicName != want || len(p.Payload) != 100*i {
			t.Fatalf("packet %d = %v, want a PUBLISH to %s with %d bytes", i, cp, want, 100*i)
		}
	}
	// A bare socket takes at least three reads a packet (header, length,
	// body); TCP may deliver the burst in more than one segment, so allow
	// a few reads, still far below that.
	if n := counted.reads.Load(); n > 3 {
		t.Errorf("%d reads of the socket for %d packets in one burst", n, len(topics))
	}
}
