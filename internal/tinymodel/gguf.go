package tinymodel

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// A minimal GGUF v3 writer: what a llama model needs and nothing more.
//
// Layout: magic "GGUF", version, tensor count, metadata count; the metadata
// key/value pairs; the tensor descriptions (name, dimensions, type, offset
// into the data section); padding to the alignment; the tensor data, each
// tensor starting at a multiple of the alignment. Every integer is little
// endian, every string a uint64 length followed by its bytes.

const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32 // the default of general.alignment
)

// Metadata value types of GGUF.
const (
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
)

// tensorF32 is ggml's type id for 32-bit floats.
const tensorF32 uint32 = 0

// kv is one metadata pair; value is uint32, int32, float32, bool, string,
// []string, []float32 or []int32.
type kv struct {
	key   string
	value any
}

// tensor is one F32 tensor; dims[0] is the fastest-varying (ggml's ne[0]).
type tensor struct {
	name string
	dims []uint64
	data []float32
}

type ggufWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (g *ggufWriter) bytes(b []byte) {
	if g.err != nil {
		return
	}
	var n int
	n, g.err = g.w.Write(b)
	g.n += int64(n)
}

func (g *ggufWriter) u32(v uint32) { g.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (g *ggufWriter) u64(v uint64) { g.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (g *ggufWriter) f32(v float32) {
	g.u32(math.Float32bits(v))
}

func (g *ggufWriter) str(s string) {
	g.u64(uint64(len(s)))
	g.bytes([]byte(s))
}

func (g *ggufWriter) pad() {
	if r := g.n % ggufAlignment; r != 0 {
		g.bytes(make([]byte, ggufAlignment-r))
	}
}

func (g *ggufWriter) value(key string, v any) {
	switch v := v.(type) {
	case uint32:
		g.u32(typeUint32)
		g.u32(v)
	case int32:
		g.u32(typeInt32)
		g.u32(uint32(v))
	case float32:
		g.u32(typeFloat32)
		g.f32(v)
	case bool:
		g.u32(typeBool)
		if v {
			g.bytes([]byte{1})
		} else {
			g.bytes([]byte{0})
		}
	case string:
		g.u32(typeString)
		g.str(v)
	case []string:
		g.u32(typeArray)
		g.u32(typeString)
		g.u64(uint64(len(v)))
		for _, s := range v {
			g.str(s)
		}
	case []float32:
		g.u32(typeArray)
		g.u32(typeFloat32)
		g.u64(uint64(len(v)))
		for _, f := range v {
			g.f32(f)
		}
	case []int32:
		g.u32(typeArray)
		g.u32(typeInt32)
		g.u64(uint64(len(v)))
		for _, i := range v {
			g.u32(uint32(i))
		}
	default:
		if g.err == nil {
			g.err = fmt.Errorf("gguf: metadata %s: unsupported type %T", key, v)
		}
	}
}

// writeGGUF writes a complete GGUF v3 file.
func writeGGUF(w io.Writer, kvs []kv, tensors []tensor) error {
	g := &ggufWriter{w: bufio.NewWriterSize(w, 1<<16)}
	g.bytes([]byte(ggufMagic))
	g.u32(ggufVersion)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(kvs)))
	for _, p := range kvs {
		g.str(p.key)
		g.value(p.key, p.value)
	}
	var offset uint64
	for _, t := range tensors {
		elems := uint64(1)
		for _, d := range t.dims {
			elems *= d
		}
		if elems != uint64(len(t.data)) {
			return fmt.Errorf("gguf: tensor %s: dims %v hold %d values, data has %d", t.name, t.dims, elems, len(t.data))
		}
		g.str(t.name)
		g.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			g.u64(d)
		}
		g.u32(tensorF32)
		g.u64(offset)
		offset += alignUp(4 * elems)
	}
	g.pad()
	for _, t := range tensors {
		buf := make([]byte, 4*len(t.data))
		for i, f := range t.data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
		}
		g.bytes(buf)
		g.pad()
	}
	if g.err != nil {
		return fmt.Errorf("gguf: %w", g.err)
	}
	if err := g.w.Flush(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func alignUp(n uint64) uint64 {
	return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment
}
