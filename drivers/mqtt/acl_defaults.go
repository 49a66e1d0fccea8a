package mqtt

// What firmware does by default at every connect that brings it nothing
// but must not be logged as a refusal each time: a Tasmota subscribes to
// its fallback topic (cmnd/<client id>_fb/#) and asks itself for its
// state with an empty POWER command.

import "strings"

// mayReadAs is mayRead for the client clientID: a login's filters naming
// the client's own id (%client%) count too.
func (r *brokerRules) mayReadAs(user, clientID, filter string) bool {
	if r.mayRead(user, filter) {
		return true
	}
	l, tied := r.tied[user]
	if !tied || clientID == "" || strings.ContainsAny(clientID, "+#/") {
		return false
	}
	for _, f := range l.clientSubscribe {
		if filterCovers(strings.ReplaceAll(f, "%client%", clientID), filter) {
			return true
		}
	}
	return false
}

// quietDrop reports whether a refused publish is one firmware sends by
// default, dropped without a log line: an empty, unretained message on a
// command topic the login may read, which is its own (Tasmota's query of
// itself; the hub asks the plug for its state itself).
func (r *brokerRules) quietDrop(user, clientID, topic string, payload []byte, retain bool) bool {
	return len(payload) == 0 && !retain && r.isCommand(topic) && r.mayReadAs(user, clientID, topic)
}
