//go:build !race

package daemon_test

// raceDetector is whether the tests run under the race detector, whose
// shadow memory makes the resident size grow with every allocation and is
// never given back.
const raceDetector = false
