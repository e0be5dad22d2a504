package wire

// Native is what ReadNative read of a body of POST
// /tasks/assistant_inference: the members the gateway uses, as written,
// and every top-level member.
type Native struct {
	// Body is the whole top-level value; the members below are read only
	// when it is an object.
	Body Value
	// Members are the body's members in order. Those the reader reads
	// are Known; the others (which the native API ignores) are recorded,
	// not read.
	Members []Member

	Messages, ModelType, Temperature, Stream, SystemMessage Value
	// Items are the elements of Messages when it is an array.
	Items []NativeMessage
}

// NativeMessage is one element of messages.
type NativeMessage struct {
	// Value is the element as written.
	Value
	// Role and Content are its members when the element is an object;
	// others are left alone.
	Role, Content Value
}

// ReadNative reads body into n, reusing n's slices. The values in n
// point into body.
func ReadNative(body []byte, n *Native) error {
	return readStrict(body, func(dec *decoder) error {
		*n = Native{Members: n.Members[:0], Items: n.Items[:0]}
		err := dec.native(n)
		if err == nil {
			err = dec.end()
		}
		return err
	})
}

// field is the member of n ReadNative reads by that name, and the name.
func (n *Native) field(name []byte) (string, *Value) {
	switch string(name) {
	case "messages":
		return "messages", &n.Messages
	case "model_type":
		return "model_type", &n.ModelType
	case "temperature":
		return "temperature", &n.Temperature
	case "stream":
		return "stream", &n.Stream
	case "system_message":
		return "system_message", &n.SystemMessage
	}
	return "", nil
}

func (dec *decoder) native(n *Native) error {
	if dec.peek() != Object {
		v, err := dec.value()
		n.Body = v
		return err
	}
	start, err := dec.open()
	if err != nil {
		return err
	}
	for {
		nm, more, err := dec.name()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k := nm.Raw[1 : len(nm.Raw)-1]
		name, field := n.field(k)
		if field == nil {
			if d, esc := unescaped(k); esc {
				k = d
				name, field = n.field(k)
			}
		}
		var v Value
		if name == "messages" && dec.peek() == Array {
			v, err = dec.nativeMessages(n)
		} else {
			v, err = dec.value()
		}
		if err != nil {
			return err
		}
		m := Member{Name: name, Start: nm.Start, End: v.End, Value: v, Known: field != nil}
		if field != nil {
			*field = v
		} else {
			m.Name = string(k)
		}
		n.Members = append(n.Members, m)
	}
	end := dec.offset()
	n.Body = dec.span(start, end)
	return nil
}

func (dec *decoder) nativeMessages(n *Native) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for {
		if end, err := dec.close(); end || err != nil {
			e := dec.offset()
			return dec.span(start, e), err
		}
		n.Items = append(n.Items, NativeMessage{})
		it := &n.Items[len(n.Items)-1]
		if dec.peek() != Object {
			if it.Value, err = dec.value(); err != nil {
				return Value{}, err
			}
			continue
		}
		mstart, err := dec.open()
		if err != nil {
			return Value{}, err
		}
		for {
			nm, more, err := dec.name()
			if err != nil {
				return Value{}, err
			}
			if !more {
				break
			}
			v, err := dec.value()
			if err != nil {
				return Value{}, err
			}
			k := nm.Raw[1 : len(nm.Raw)-1]
			if string(k) != "role" && string(k) != "content" {
				k, _ = unescaped(k)
			}
			switch string(k) {
			case "role":
				it.Role = v
			case "content":
				it.Content = v
			}
		}
		e := dec.offset()
		it.Value = dec.span(mstart, e)
	}
}
