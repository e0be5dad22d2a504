package freeport

import (
	"fmt"
	"syscall"
)

// refusing binds a TCP socket to 127.0.0.1 on a port the kernel picks,
// without listening: a connection to it is refused, and, the socket not
// allowing address reuse, no other socket can bind that port while it is
// open.
func refusing() (int, func(), error) {
	for range 100 {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("freeport: socket: %w", err)
		}
		release := func() { _ = syscall.Close(fd) }
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			release()
			return 0, nil, fmt.Errorf("freeport: bind: %w", err)
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			release()
			return 0, nil, fmt.Errorf("freeport: getsockname: %w", err)
		}
		if port := sa.(*syscall.SockaddrInet4).Port; port >= lowest {
			Mark(port)
			return port, release, nil
		}
		release()
	}
	return 0, nil, fmt.Errorf("freeport: no port above %d in 100 tries", lowest)
}
