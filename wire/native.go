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

// ReadNative reads body into n, reusing n's slices.
func ReadNative(body []byte, n *Native) error {
	*n = Native{Members: n.Members[:0], Items: n.Items[:0]}
	dec := newDecoder(body, false)
	defer dec.free()
	err := dec.native(n)
	if err == nil {
		err = dec.end()
	}
	return err
}

// field is the member of n ReadNative reads by that name.
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
	v, err := dec.object(func(k []byte, start int) error {
		m := Member{Start: start}
		name, field := n.field(k)
		var err error
		if name == "messages" && dec.peek() == Array {
			m.Value, err = dec.array(func(int) error { return dec.nativeMessage(n) })
		} else {
			m.Value, err = dec.value()
		}
		if err != nil {
			return err
		}
		m.End = m.Value.End
		if field != nil {
			m.Name, m.Known, *field = name, true, m.Value
		} else {
			m.Name = string(k)
		}
		n.Members = append(n.Members, m)
		return nil
	})
	n.Body = v
	return err
}

func (dec *decoder) nativeMessage(n *Native) error {
	var it NativeMessage
	var err error
	if dec.peek() != Object {
		it.Value, err = dec.value()
	} else {
		it.Value, err = dec.object(func(k []byte, _ int) error {
			v, err := dec.value()
			switch string(k) {
			case "role":
				it.Role = v
			case "content":
				it.Content = v
			}
			return err
		})
	}
	n.Items = append(n.Items, it)
	return err
}
