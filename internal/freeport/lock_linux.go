package freeport

import (
	"net"
	"strconv"
)

// held keeps the locks open for the life of the process.
var held []net.Listener

// lock takes the lock of port for this process: an abstract Unix socket
// (no file; the kernel lets one socket have a name at a time, and frees it
// when its process ends). It reports false when another process has it.
func lock(port int) bool {
	l, err := net.Listen("unix", "@llmedge-freeport/"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	held = append(held, l)
	return true
}
