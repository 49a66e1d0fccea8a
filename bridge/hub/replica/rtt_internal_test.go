package replica

import (
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
)

// TestRTTEstimate: RFC 6298's SRTT, RTTVAR and RTO, and the deadlines
// derived from them: today's fixed values on a fast link, growing with
// the round trip on a slow one.
func TestRTTEstimate(t *testing.T) {
	h := &Follower{}
	if h.rtt.rto() != 0 || h.syncDeadline() != syncTimeout || h.firstBeatDeadline() != heartbeatSilence ||
		h.beatSilence() != heartbeatSilence || h.pollDeadline() != link.DefaultPollTimeout+pollGrace || h.requestDeadline() != requestTimeout {
		t.Errorf("before any sample the deadlines differ from the fixed values")
	}
	h.rtt.sample(2 * time.Second)
	if s, v, _ := h.rtt.smoothed(); s != 2*time.Second || v != time.Second || h.rtt.rto() != 6*time.Second {
		t.Errorf("first sample 2 s: SRTT %v RTTVAR %v RTO %v, want 2 s, 1 s, 6 s", s, v, h.rtt.rto())
	}
	// R' = 6 s: RTTVAR = 3/4·1 + 1/4·|2-6| = 1.75 s; SRTT = 7/8·2 + 1/8·6 = 2.5 s.
	h.rtt.sample(6 * time.Second)
	if s, v, _ := h.rtt.smoothed(); s != 2500*time.Millisecond || v != 1750*time.Millisecond || h.rtt.rto() != 9500*time.Millisecond {
		t.Errorf("after 6 s: SRTT %v RTTVAR %v RTO %v, want 2.5 s, 1.75 s, 9.5 s", s, v, h.rtt.rto())
	}
	for range 100 {
		h.rtt.sample(6 * time.Second)
	}
	if s, _, _ := h.rtt.smoothed(); s < 5990*time.Millisecond || h.rtt.rto() < 6*time.Second || h.rtt.rto() > 6100*time.Millisecond {
		t.Errorf("a steady 6 s: SRTT %v RTO %v", s, h.rtt.rto())
	}
	if h.syncDeadline() < 12*time.Second || h.firstBeatDeadline() < 9*time.Second || h.pollDeadline() < 36*time.Second ||
		h.beatSilence() < heartbeatSilence || h.beatSilence() > heartbeatSilence+time.Second {
		t.Errorf("on a 6 s link: sync %v, first beat %v, beat silence %v, poll %v", h.syncDeadline(), h.firstBeatDeadline(), h.beatSilence(), h.pollDeadline())
	}
	// A fast link again: RTO falls back toward G, never below.
	for range 200 {
		h.rtt.sample(time.Millisecond)
	}
	if h.rtt.rto() < rttGranularity || h.rtt.rto() > 100*time.Millisecond || h.syncDeadline() != syncTimeout {
		t.Errorf("fast again: RTO %v, sync deadline %v", h.rtt.rto(), h.syncDeadline())
	}
	h.rtt.sample(time.Hour)
	if h.rtt.rto() > maxRTT {
		t.Errorf("RTO %v past its bound", h.rtt.rto())
	}
}
