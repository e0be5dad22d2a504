package protocols

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Dialer returns the DialContext of a transport to replicas: TCP with
// timeout and keep-alives, its connections writing a request body with a
// pooled buffer. net/http copies a body of known length to the
// connection through the connection's ReadFrom, which for TCP has no
// buffer of its own to give io.Copy: 32 KiB allocated per request whose
// body is not a file (every prompt), most of what a request of a few
// pages left to the garbage collector once its body was pooled.
func Dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return copyConn{c}, nil
	}
}

// copyConn is a connection whose ReadFrom writes a body that can write
// itself at once, and copies any other with a pooled buffer.
type copyConn struct{ net.Conn }

// sizedWriterTo is a body that writes itself at once and knows how much
// it has left: a leased body's pieces (one writev, where a copy moves a
// megabyte prompt through the buffer in 32 writes), a bytes.Reader.
type sizedWriterTo interface {
	io.WriterTo
	Len() int
}

func (c copyConn) ReadFrom(r io.Reader) (int64, error) {
	// net/http sends a body of known length as io.LimitReader(body, n);
	// the body may write itself when it holds no more than n.
	if lr, ok := r.(*io.LimitedReader); ok {
		if wt, ok := lr.R.(sizedWriterTo); ok && int64(wt.Len()) <= lr.N {
			n, err := wt.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(writeOnly{c.Conn}, r, *buf)
}

// writeOnly hides the connection's own ReadFrom from io.CopyBuffer.
type writeOnly struct{ io.Writer }

// copyBufs are copyConn's buffers, of io.Copy's size.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
