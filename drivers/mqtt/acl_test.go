package mqtt

import "testing"

func TestTopicMatch(t *testing.T) {
	for _, tt := range []struct {
		filter, topic string
		want          bool
	}{
		{"cmnd/+/#", "cmnd/tas1/POWER", true},
		{"cmnd/+/#", "cmnd/tas1", true}, // # covers the parent level
		{"cmnd/+/#", "stat/tas1/POWER", false},
		{"zigbee2mqtt/lamp", "zigbee2mqtt/lamp/set", false}, // where mochi's ledger says true
		{"zigbee2mqtt/#/set", "zigbee2mqtt/hall/lamp/set", true},
		{"zigbee2mqtt/#/set", "zigbee2mqtt/set", false},
		{"zigbee2mqtt/#/set/+", "zigbee2mqtt/lamp/set/state", true},
		{"zigbee2mqtt/#/set", "zigbee2mqtt/hall/lamp", false},
		{"a/b", "a/b", true},
		{"a/b", "a", false},
	} {
		if got := topicMatch(tt.filter, tt.topic); got != tt.want {
			t.Errorf("topicMatch(%q, %q) = %v", tt.filter, tt.topic, got)
		}
	}
}

func TestFilterCovers(t *testing.T) {
	for _, tt := range []struct {
		rule, sub string
		want      bool
	}{
		{"cmnd/tas1/#", "cmnd/tas1/#", true},
		{"cmnd/tas1/#", "cmnd/tas1/POWER", true},
		{"cmnd/tas1/#", "cmnd/#", false},
		{"cmnd/tas1/#", "cmnd/+/POWER", false},
		{"a/+/c", "a/b/c", true},
		{"a/+/c", "a/+/c", true},
		{"a/b/c", "a/+/c", false},
		{"a/+", "a/#", false},
		{"a/b", "a/b/c", false},
	} {
		if got := filterCovers(tt.rule, tt.sub); got != tt.want {
			t.Errorf("filterCovers(%q, %q) = %v", tt.rule, tt.sub, got)
		}
	}
}
