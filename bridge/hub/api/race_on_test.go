//go:build race

package api

// raceDetector is whether the tests run under the race detector, under
// which sync.Pool drops what it is given at random: allocation counts
// then vary from run to run.
const raceDetector = true
