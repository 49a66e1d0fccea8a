package mqtt

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/switchbridge/switchbridge/bridge"
)

// call is a request to a replier's plug waiting for its answer.
type call struct {
	dev    *device
	target bridge.Value // "" for a question of the plug's state
}

// replySource is whom a replier's plug answers: one source per switch, so
// each switch's answers come on a reply topic of their own, which the
// embedded broker lets only that switch's login publish on. With one
// topic for all, a login serving one plug could answer for another.
func replySource(clientID, switchID string) string { return clientID + "-" + switchID }

// maxRequestID bounds the request ids to what a JSON number carries exactly
// (2^53): firmware may read the id as a double and echo it back.
const maxRequestID = 1<<53 - 1

// request makes a request of dev's replier, for target or ("") for its
// state, and records it until its answer arrives or forget. The id is
// random, so a client that sees neither request nor answer cannot guess
// it.
func (d *driver) request(dev *device, target bridge.Value) (uint64, message) {
	d.mu.Lock()
	var id uint64
	for id == 0 || d.pending[id].dev != nil {
		id = randomRequestID()
	}
	d.pending[id] = call{dev: dev, target: target}
	d.mu.Unlock()
	return id, dev.plug.requests.request(id, replySource(d.set.ClientID, dev.id), target)
}

// randomRequestID returns a random id between 0 and maxRequestID (0 is
// skipped by the caller: a reply without an id reads as 0).
func randomRequestID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24)
	return binary.BigEndian.Uint64(b[:]) & maxRequestID
}

// forget drops a request whose caller no longer waits.
func (d *driver) forget(id uint64) {
	d.mu.Lock()
	delete(d.pending, id)
	d.mu.Unlock()
}

// answer matches a message on dev's reply topic with its request and
// applies it to dev. An answer to no pending request of dev (a late one,
// another client's, or a forgery naming another plug's request) is
// dropped, and the request stays pending.
func (d *driver) answer(dev *device, payload []byte) {
	id, r, ok := dev.plug.requests.reply(payload)
	if !ok {
		return
	}
	d.mu.Lock()
	c, ok := d.pending[id]
	if ok && c.dev == dev {
		delete(d.pending, id)
	}
	d.mu.Unlock()
	if !ok || c.dev != dev {
		return
	}
	if c.target != "" && r.failure == "" {
		r.value = c.target // the command is done
	}
	c.dev.apply(r, false)
}
