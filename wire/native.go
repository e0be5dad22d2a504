package wire

// Native is what ReadNative read of a body of POST
// /tasks/assistant_inference: the members the gateway uses, as written,
// and every top-level member.
type Native struct {
	// Body is the whole top-level value; the members below are read only
	// when it is an object.
	Body Value
	// Members are the body's members in order, the known ones included.
	Members []Member

	Messages, ModelType, Temperature, Stream, SystemMessage Value
	// Items are the elements of Messages when it is an array.
	Items []NativeMessage
}

// NativeMessage is one element of messages.
type NativeMessage struct {
	// Value is the element as written.
	Value
	// Role and Content are its members, when the element is an object.
	Role, Content Value
}

// ReadNative reads body into n, reusing n's slices. Unknown members are
// recorded in Members and otherwise left alone, as are the members of a
// message other than role and content.
func ReadNative(body []byte, n *Native) error {
	members, items := n.Members[:0], n.Items[:0]
	*n = Native{}
	dec := newDecoder(body, false)
	defer dec.free()
	err := dec.native(n, members, items)
	if err == nil {
		err = dec.end()
	}
	return err
}

func (dec *decoder) native(n *Native, members []Member, items []NativeMessage) error {
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
		m := Member{Start: nm.Start}
		k := key(nm.Raw)
		if string(k) == "messages" && dec.peek() == Array {
			m.Name = "messages"
			items, m.Value, err = dec.nativeMessages(items)
		} else {
			m.Value, err = dec.value()
		}
		if err != nil {
			return err
		}
		m.End = m.Value.End
		switch string(k) {
		case "messages":
			m.Name, n.Messages = "messages", m.Value
		case "model_type":
			m.Name, n.ModelType = "model_type", m.Value
		case "temperature":
			m.Name, n.Temperature = "temperature", m.Value
		case "stream":
			m.Name, n.Stream = "stream", m.Value
		case "system_message":
			m.Name, n.SystemMessage = "system_message", m.Value
		default:
			m.Name = string(k)
		}
		members = append(members, m)
	}
	end := dec.offset()
	n.Body = Value{Raw: dec.body[start:end:end], Start: start, End: end}
	n.Members, n.Items = members, items
	return nil
}

// nativeMessages reads the array of messages.
func (dec *decoder) nativeMessages(items []NativeMessage) ([]NativeMessage, Value, error) {
	start, err := dec.open()
	if err != nil {
		return items, Value{}, err
	}
	for {
		if end, err := dec.close(); end || err != nil {
			e := dec.offset()
			return items, Value{Raw: dec.body[start:e:e], Start: start, End: e}, err
		}
		var it NativeMessage
		if dec.peek() != Object {
			it.Value, err = dec.value()
		} else {
			err = dec.nativeMessage(&it)
		}
		if err != nil {
			return items, Value{}, err
		}
		items = append(items, it)
	}
}

func (dec *decoder) nativeMessage(it *NativeMessage) error {
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
		v, err := dec.value()
		if err != nil {
			return err
		}
		switch string(key(nm.Raw)) {
		case "role":
			it.Role = v
		case "content":
			it.Content = v
		}
	}
	end := dec.offset()
	it.Value = Value{Raw: dec.body[start:end:end], Start: start, End: end}
	return nil
}
