package share

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/llmedge/llmedge/routing/prefix"
)

// A batch is a version byte, then records, each:
//
//	uvarint len(model), model, uvarint blockSize,
//	uvarint len(replica), replica, uvarint n, n hashes (8 bytes, little endian)
//
// Binary rather than JSON: a 16 KiB prompt is 256 hashes, 2 KiB here and
// about 5 KiB as JSON numbers, and decoding costs no allocation per hash.
const version = 1

// Bounds of a record, checked when decoding: anyone who can write to the
// stream can write garbage, which must cost nothing but a counted error.
const (
	maxName   = 4096
	maxHashes = prefix.MaxMaxBlocks
)

// Insertion is one routing decision: the prompt whose block hashes are
// Hashes (for model Model, cut in blocks of BlockSize bytes) went to
// Replica.
type Insertion struct {
	Model     string
	BlockSize int
	Replica   string
	Hashes    []uint64
}

// appendRecord appends one insertion to a batch (started with
// startBatch).
func appendRecord(b []byte, model string, blockSize int, replica string, hashes []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(model)))
	b = append(b, model...)
	b = binary.AppendUvarint(b, uint64(blockSize))
	b = binary.AppendUvarint(b, uint64(len(replica)))
	b = append(b, replica...)
	b = binary.AppendUvarint(b, uint64(len(hashes)))
	for _, h := range hashes {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return b
}

func startBatch(b []byte) []byte { return append(b[:0], version) }

var errBatch = errors.New("share: malformed batch")

// decodeBatch calls apply for each record of b, in order, with hashes
// decoded into a buffer reused from record to record (apply must not keep
// it). It stops at the first malformed record, after applying the ones
// before it.
func decodeBatch(b []byte, buf []uint64, apply func(Insertion)) ([]uint64, error) {
	if len(b) == 0 || b[0] != version {
		return buf, fmt.Errorf("%w: unknown version", errBatch)
	}
	r := fields{b: b[1:]}
	for len(r.b) > 0 {
		var in Insertion
		var ok bool
		var bs, n uint64
		if in.Model, ok = r.str(); !ok {
			return buf, fmt.Errorf("%w: model", errBatch)
		}
		if bs, ok = r.num(prefix.MaxBlockSize); !ok {
			return buf, fmt.Errorf("%w: block size", errBatch)
		}
		if in.Replica, ok = r.str(); !ok {
			return buf, fmt.Errorf("%w: replica", errBatch)
		}
		if n, ok = r.num(maxHashes); !ok || uint64(len(r.b)) < 8*n {
			return buf, fmt.Errorf("%w: hashes", errBatch)
		}
		buf = buf[:0]
		for i := range int(n) {
			buf = append(buf, binary.LittleEndian.Uint64(r.b[8*i:]))
		}
		r.b = r.b[8*n:]
		in.BlockSize, in.Hashes = int(bs), buf
		apply(in)
	}
	return buf, nil
}

// fields reads a batch's fields in order (decodeBatch's, decodeQueues'):
// uvarints within a limit, and strings of a uvarint length up to maxName.
type fields struct{ b []byte }

// num reads a uvarint of at most limit; false when there is none.
func (r *fields) num(limit uint64) (uint64, bool) {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > limit {
		return 0, false
	}
	r.b = r.b[k:]
	return n, true
}

// str reads a string of at most maxName bytes; false when there is none.
func (r *fields) str() (string, bool) {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > maxName || uint64(len(r.b)-k) < n {
		return "", false
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s, true
}
