package wire

// Request is what ReadRequest read of a request body whose members the
// gateway reads few of (a completion's, an embedding's): the body and its
// top-level members with their spans, every value checked as JSON.
type Request struct {
	Body    Value
	Members []Member
}

// ReadRequest reads body into o, reusing o.Members. The body must be one
// JSON value; duplicate names anywhere and invalid UTF-8 are refused, as
// in the other request readers.
func ReadRequest(body []byte, o *Request) error {
	return readStrict(body, func(dec *decoder) error { return dec.request(o) })
}

func (dec *decoder) request(o *Request) error {
	o.Body, o.Members = Value{}, o.Members[:0]
	if dec.peek() != Object {
		v, err := dec.value()
		if err == nil {
			err = dec.end()
		}
		o.Body = v
		return err
	}
	start, err := dec.open()
	if err != nil {
		return err
	}
	for {
		n, more, err := dec.name()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		v, err := dec.value()
		if err != nil {
			return err
		}
		o.Members = append(o.Members, Member{Name: string(key(n.Raw)), Start: n.Start, End: v.End, Value: v})
	}
	end := dec.offset()
	o.Body = dec.span(start, end)
	return dec.end()
}

// Member returns the member of o named name, or an absent Value.
func (o *Request) Member(name string) Value {
	for _, m := range o.Members {
		if m.Name == name {
			return m.Value
		}
	}
	return Value{}
}
