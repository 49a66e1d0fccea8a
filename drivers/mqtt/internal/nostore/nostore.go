// Package nostore is a paho store that keeps nothing, for the MQTT driver
// and its device simulators: paho then has nothing to send again after a
// reconnect. paho keeps every unacknowledged publish and resends it after
// a reconnect, clean session or not; a command resent after an outage
// would switch a plug long after its client was told it failed, and
// paho's resend pass races with its own writer on a publish made as the
// connection comes back. Tokens complete from paho's table of message ids,
// not from the store.
package nostore

import "github.com/eclipse/paho.mqtt.golang/packets"

// Store implements paho.Store and keeps nothing.
type Store struct{}

func (Store) Open()                             {}
func (Store) Put(string, packets.ControlPacket) {}
func (Store) Get(string) packets.ControlPacket  { return nil }
func (Store) All() []string                     { return nil }
func (Store) Del(string)                        {}
func (Store) Close()                            {}
func (Store) Reset()                            {}
