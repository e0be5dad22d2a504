//go:build race

package bench

// raceEnabled: this test binary has the race detector, which valgrind
// cannot run in reasonable time.
const raceEnabled = true
