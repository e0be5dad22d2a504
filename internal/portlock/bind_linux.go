package portlock

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// bind listens on the abstract Unix socket named name: the kernel lets one
// socket have a name at a time, and frees it when its process ends.
func bind(name string) (io.Closer, error) {
	l, err := net.Listen("unix", "@"+name)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, ErrHeld
	}
	return l, err
}
