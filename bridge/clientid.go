package bridge

import "time"

// MQTTClientID is a client id of the embedded MQTT broker and the plug
// login it belongs to: the first login that connected with it, until the
// owner frees it. The hub keeps these so that one plug login cannot take
// another's client id, and with it that plug's session, while the plug is
// offline.
type MQTTClientID struct {
	ID, Login string
	// Bound is when the login first connected with it, LastUsed when it
	// last did.
	Bound, LastUsed time.Time
}
