//go:build race

package protocols

// raceEnabled: the race detector makes sync.Pool drop what it is given at
// random, so allocation counts mean nothing under it.
const raceEnabled = true
