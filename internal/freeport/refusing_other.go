//go:build !linux

package freeport

// refusing returns a port that was free a moment ago: without Linux's
// socket calls the port is not held.
func refusing() (int, func(), error) {
	port, err := Get()
	return port, func() {}, err
}
