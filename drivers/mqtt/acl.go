package mqtt

import (
	"strings"
)

// brokerRules is who may do what on the embedded broker. The hub's login
// may do everything. A plug login may publish what its plugs report and
// subscribe to what its plugs are sent; nobody but the hub publishes a
// command, and nobody retains one.
//
// mochi's auth.Ledger was the first choice, but it does not fit: its topic
// match takes a filter for a match of every longer topic (a rule for
// zigbee2mqtt/lamp admits zigbee2mqtt/lamp/set), a user's first matching
// rule wins in map order, and a topic no rule names is allowed.
type brokerRules struct {
	hubUser     string
	hubClientID string
	// commands are the filters only the hub publishes on (plugACL.commands
	// of every plug).
	commands []string
	// owners maps each topic the hub reads for a plug to the switches it
	// reports for: only their logins may publish there.
	owners map[string][]string
	// claimed holds the switches some login lists.
	claimed map[string]bool
	// tied holds the logins that list their switches. A login that lists
	// none (the older form, or any client when there are no logins) may
	// publish anything but commands and the reports of claimed switches.
	tied map[string]*loginRules
	// plugs is the number of switches, all of which a login of the older
	// form may serve.
	plugs int
}

// spareSessions is how many kept sessions a login may hold beyond one per
// switch it serves: room for a plug replaced, or one whose firmware changed
// its client id.
const spareSessions = 2

// loginRules is what one login tied to its switches may do.
type loginRules struct {
	switches        map[string]bool
	publish         []string
	subscribe       []string
	clientSubscribe []string // with %client% for the client's id
}

// newBrokerRules derives the rules from the logins and the plugs, keyed by
// switch id. A plug whose firmware answers requests (a replier) reports on
// its switch's own reply topic too (see replySource).
func newBrokerRules(hubUser, hubClientID string, logins map[string]Login, plugs map[string]*plug) *brokerRules {
	r := &brokerRules{hubUser: hubUser, hubClientID: hubClientID, owners: map[string][]string{},
		claimed: map[string]bool{}, tied: map[string]*loginRules{}, plugs: len(plugs)}
	seen := map[string]bool{}
	for id, p := range plugs {
		for _, c := range p.acl.commands {
			if !seen[c] {
				seen[c] = true
				r.commands = append(r.commands, c)
			}
		}
		for t := range p.routes {
			r.owners[t] = append(r.owners[t], id)
		}
		if p.requests != nil {
			t := p.requests.replyTopic(replySource(hubClientID, id))
			r.owners[t] = append(r.owners[t], id)
		}
	}
	for user, l := range logins {
		if len(l.Switches) == 0 {
			continue
		}
		lr := &loginRules{switches: map[string]bool{}}
		for _, id := range l.Switches {
			p, ok := plugs[id]
			if !ok {
				continue // reported by the config check
			}
			r.claimed[id] = true
			lr.switches[id] = true
			lr.publish = append(lr.publish, p.acl.publish...)
			lr.subscribe = append(lr.subscribe, p.acl.subscribe...)
			lr.clientSubscribe = append(lr.clientSubscribe, p.acl.clientSubscribe...)
		}
		r.tied[user] = lr
	}
	return r
}

// keptSessions is how many sessions user may have the broker keep while
// its clients are disconnected (clean session off).
func (r *brokerRules) keptSessions(user string) int {
	if user == OnboardingLogin {
		return onboardingSessions
	}
	if l, ok := r.tied[user]; ok {
		return len(l.switches) + spareSessions
	}
	return r.plugs + spareSessions
}

// isCommand reports whether topic is one only the hub may publish on.
func (r *brokerRules) isCommand(topic string) bool {
	for _, c := range r.commands {
		if topicMatch(c, topic) {
			return true
		}
	}
	return false
}

// mayPublish reports whether user may publish on topic.
func (r *brokerRules) mayPublish(user, topic string) bool {
	if user == r.hubUser {
		return true
	}
	if user == OnboardingLogin {
		return r.onboardingMayPublish(topic)
	}
	if strings.HasPrefix(topic, "$") || r.isCommand(topic) {
		return false
	}
	l, tied := r.tied[user]
	if owners, ok := r.owners[topic]; ok {
		for _, id := range owners {
			if tied && l.switches[id] || !tied && !r.claimed[id] {
				return true
			}
		}
		return false
	}
	if !tied {
		return true
	}
	for _, f := range l.publish {
		if topicMatch(f, topic) {
			return true
		}
	}
	return false
}

// mayRead reports whether user may subscribe to filter, or be sent a
// message on topic (mochi asks both).
func (r *brokerRules) mayRead(user, filter string) bool {
	if user == r.hubUser {
		return true
	}
	// Nothing that starts with a wildcard (#, +/#: everything), no $SYS
	// and no shared subscriptions ($share/…).
	if filter == "" || filter[0] == '#' || filter[0] == '+' || filter[0] == '$' {
		return false
	}
	if user == OnboardingLogin {
		// It receives nothing: every filter a firmware subscribes to at
		// connect (Tasmota's cmnd/<topic>/#, a Shelly's command and rpc
		// topics) carries commands.
		return false
	}
	l, tied := r.tied[user]
	if !tied {
		return true
	}
	for _, f := range l.subscribe {
		if filterCovers(f, filter) {
			return true
		}
	}
	return false
}

// topicMatch reports whether the topic name matches filter: MQTT's + and a
// trailing #, plus one extension for commands: a # followed by more levels
// matches one or more levels there (a/#/set matches a/x/y/set). A filter
// holds at most one such #.
func topicMatch(filter, topic string) bool {
	f := strings.Split(filter, "/")
	t := strings.Split(topic, "/")
	for i, lv := range f {
		if lv == "#" {
			if i == len(f)-1 {
				return matchLevels(f[:i], t[:min(i, len(t))]) && len(t) >= i
			}
			tail := f[i+1:]
			if len(t) < i+1+len(tail) {
				return false
			}
			return matchLevels(f[:i], t[:i]) && matchLevels(tail, t[len(t)-len(tail):])
		}
	}
	return len(f) == len(t) && matchLevels(f, t)
}

// matchLevels matches equally long level lists with +.
func matchLevels(f, t []string) bool {
	if len(f) != len(t) {
		return false
	}
	for i := range f {
		if f[i] != "+" && f[i] != t[i] {
			return false
		}
	}
	return true
}

// filterCovers reports whether every topic sub matches is matched by rule,
// both MQTT filters (a topic name is a filter matching itself).
func filterCovers(rule, sub string) bool {
	r := strings.Split(rule, "/")
	s := strings.Split(sub, "/")
	for i, lv := range r {
		if lv == "#" {
			return i == len(r)-1
		}
		if i >= len(s) {
			return false
		}
		switch {
		case s[i] == "#":
			return false
		case lv == "+":
		case lv != s[i]: // s[i] == "+" is wider than a literal level
			return false
		}
	}
	return len(r) == len(s)
}
