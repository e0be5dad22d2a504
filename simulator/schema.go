package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A deterministic generator of JSON values valid against a JSON schema, for
// tool-call arguments and structured output. It covers the subset that
// function parameters and response formats use:
//
//   - type (a name or a list: the first that is not "null"), or inferred
//     from properties, items or enum; boolean schemas (true: a string);
//   - enum and const (the value itself);
//   - object: the required properties, in the order of "properties", then
//     optional ones up to minProperties; additionalProperties' schema for
//     required names "properties" lacks;
//   - array: minItems items (1 or 2 without it), at most maxItems, from
//     prefixItems then items; uniqueItems;
//   - string: one or two words, stretched or cut to minLength and
//     maxLength; the formats date-time, date, time, email, uri, uuid,
//     hostname, ipv4 and ipv6;
//   - number and integer: within minimum, maximum and their exclusive
//     forms, a multiple of multipleOf;
//   - $ref to "#" or a JSON pointer inside the root schema ($defs,
//     definitions), anyOf and oneOf (the first branch that is not null),
//     allOf (properties and required merged).
//
// It ignores pattern, not, if/then/else, patternProperties and the
// dependent keywords: a schema that relies on them may get a value it
// rejects. The same schema and random source give the same value.

// maxSchemaDepth bounds the nesting of generated values (recursive schemas).
const maxSchemaDepth = 12

// schema is the part of a JSON schema the generator reads.
type schema struct {
	Type                 typeList          `json:"type"`
	Properties           orderedProps      `json:"properties"`
	Required             []string          `json:"required"`
	AdditionalProperties json.RawMessage   `json:"additionalProperties"`
	MinProperties        *int              `json:"minProperties"`
	Items                json.RawMessage   `json:"items"`
	PrefixItems          []json.RawMessage `json:"prefixItems"`
	MinItems             *int              `json:"minItems"`
	MaxItems             *int              `json:"maxItems"`
	UniqueItems          bool              `json:"uniqueItems"`
	Enum                 []json.RawMessage `json:"enum"`
	Const                json.RawMessage   `json:"const"`
	AnyOf                []json.RawMessage `json:"anyOf"`
	OneOf                []json.RawMessage `json:"oneOf"`
	AllOf                []json.RawMessage `json:"allOf"`
	Ref                  string            `json:"$ref"`
	Minimum              *json.Number      `json:"minimum"`
	Maximum              *json.Number      `json:"maximum"`
	// ExclusiveMinimum and ExclusiveMaximum are numbers (draft 6 on) or
	// booleans qualifying minimum and maximum (draft 4).
	ExclusiveMinimum json.RawMessage `json:"exclusiveMinimum"`
	ExclusiveMaximum json.RawMessage `json:"exclusiveMaximum"`
	MultipleOf       *json.Number    `json:"multipleOf"`
	MinLength        *int            `json:"minLength"`
	MaxLength        *int            `json:"maxLength"`
	Format           string          `json:"format"`

	hasConst bool
}

// typeList is "type": one name or a list of names.
type typeList []string

func (t *typeList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = typeList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*t = list
	return nil
}

// orderedProps is "properties" in the order the schema lists them.
type orderedProps struct {
	names   []string
	schemas map[string]json.RawMessage
}

func (o *orderedProps) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("properties: want an object")
	}
	o.schemas = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if _, dup := o.schemas[name]; !dup {
			o.names = append(o.names, name)
		}
		o.schemas[name] = raw
	}
	return nil
}

// schemaGen generates values for schemas within one root schema.
type schemaGen struct {
	root json.RawMessage
	rng  *rand.Rand
}

// generateJSON returns a compact JSON value valid against the schema raw
// (an object for nil: function parameters default to an empty object).
func generateJSON(raw json.RawMessage, rng *rand.Rand) string {
	if isNull(raw) {
		return "{}"
	}
	g := &schemaGen{root: raw, rng: rng}
	var b bytes.Buffer
	g.value(&b, raw, 0)
	return b.String()
}

// generateFormat returns the JSON text of a response_format answer: a
// value of the schema, or for json_object (or a json_schema without a
// schema) {"answer": "<words>"} of n words.
func generateFormat(f *outputFormat, rng *rand.Rand, n int) string {
	if f.Schema != nil {
		return generateJSON(f.Schema, rng)
	}
	ws := make([]string, max(n, 1))
	for i := range ws {
		ws[i] = words[rng.IntN(len(words))]
	}
	return `{"answer":` + string(encodeJSON(strings.Join(ws, " "))) + `}`
}

// parse reads a schema; a boolean schema or an unreadable one is returned
// as nil with ok telling true from false.
func parseSchema(raw json.RawMessage) (s *schema, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, !bytes.Equal(raw, []byte("false"))
	}
	s = &schema{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, true
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) == nil {
		_, s.hasConst = keys["const"]
	}
	return s, true
}

// resolve follows $ref from s (a JSON pointer into the root), at most a
// few times in a row.
func (g *schemaGen) resolve(s *schema) *schema {
	for range 8 {
		if s == nil || s.Ref == "" {
			return s
		}
		raw, ok := jsonPointer(g.root, s.Ref)
		if !ok {
			return nil
		}
		s, _ = parseSchema(raw)
	}
	return s
}

// jsonPointer finds ref ("#", "#/a/b") inside root.
func jsonPointer(root json.RawMessage, ref string) (json.RawMessage, bool) {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := root
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		if path == "" {
			break
		}
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) == nil {
			if cur, ok = obj[seg]; !ok {
				return nil, false
			}
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(seg)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
			return nil, false
		}
		cur = arr[i]
	}
	return cur, true
}

// value writes a value of the schema raw.
func (g *schemaGen) value(b *bytes.Buffer, raw json.RawMessage, depth int) {
	s, ok := parseSchema(raw)
	if !ok || depth > maxSchemaDepth {
		b.WriteString("null")
		return
	}
	s = g.resolve(s)
	if s == nil {
		g.str(b, &schema{})
		return
	}
	switch {
	case s.hasConst:
		writeCompact(b, s.Const)
		return
	case len(s.Enum) > 0:
		writeCompact(b, s.Enum[g.rng.IntN(len(s.Enum))])
		return
	case len(s.AnyOf) > 0 || len(s.OneOf) > 0:
		branches := append(s.AnyOf, s.OneOf...)
		for _, br := range branches {
			if bs, _ := parseSchema(br); bs != nil && len(bs.Type) == 1 && bs.Type[0] == "null" {
				continue
			}
			g.value(b, br, depth+1)
			return
		}
		b.WriteString("null")
		return
	}
	if len(s.AllOf) > 0 {
		s = g.merge(s)
	}
	switch g.typeOf(s) {
	case "object":
		g.object(b, s, depth)
	case "array":
		g.array(b, s, depth)
	case "integer":
		g.number(b, s, true)
	case "number":
		g.number(b, s, false)
	case "boolean":
		b.WriteString(strconv.FormatBool(g.rng.IntN(2) == 0))
	case "null":
		b.WriteString("null")
	default:
		g.str(b, s)
	}
}

// typeOf picks the type to generate: the first listed that is not null,
// else one the keywords imply.
func (g *schemaGen) typeOf(s *schema) string {
	for _, t := range s.Type {
		if t != "null" {
			return t
		}
	}
	switch {
	case len(s.Type) > 0:
		return "null"
	case s.Properties.schemas != nil || s.Required != nil || s.MinProperties != nil:
		return "object"
	case s.Items != nil || s.PrefixItems != nil:
		return "array"
	case s.Minimum != nil || s.Maximum != nil || s.MultipleOf != nil:
		return "number"
	}
	return "string"
}

// merge folds allOf's object keywords into s.
func (g *schemaGen) merge(s *schema) *schema {
	m := *s
	m.AllOf = nil
	m.Properties = orderedProps{names: append([]string(nil), s.Properties.names...), schemas: map[string]json.RawMessage{}}
	for k, v := range s.Properties.schemas {
		m.Properties.schemas[k] = v
	}
	m.Required = append([]string(nil), s.Required...)
	for _, raw := range s.AllOf {
		sub, _ := parseSchema(raw)
		sub = g.resolve(sub)
		if sub == nil {
			continue
		}
		if len(m.Type) == 0 {
			m.Type = sub.Type
		}
		for _, n := range sub.Properties.names {
			if _, ok := m.Properties.schemas[n]; !ok {
				m.Properties.names = append(m.Properties.names, n)
			}
			m.Properties.schemas[n] = sub.Properties.schemas[n]
		}
		m.Required = append(m.Required, sub.Required...)
	}
	return &m
}

// object writes the required properties, then optional ones up to
// minProperties.
func (g *schemaGen) object(b *bytes.Buffer, s *schema, depth int) {
	var names []string
	seen := map[string]bool{}
	required := map[string]bool{}
	for _, n := range s.Required {
		required[n] = true
	}
	for _, n := range s.Properties.names {
		if required[n] && !seen[n] {
			names, seen[n] = append(names, n), true
		}
	}
	for _, n := range s.Required {
		if !seen[n] {
			names, seen[n] = append(names, n), true
		}
	}
	if s.MinProperties != nil {
		for _, n := range s.Properties.names {
			if len(names) >= *s.MinProperties {
				break
			}
			if !seen[n] {
				names, seen[n] = append(names, n), true
			}
		}
		for i := 0; len(names) < *s.MinProperties && i < 64; i++ {
			if n := "key" + strconv.Itoa(i); !seen[n] {
				names, seen[n] = append(names, n), true
			}
		}
	}
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeJSON(n))
		b.WriteByte(':')
		sub, ok := s.Properties.schemas[n]
		if !ok {
			sub = s.AdditionalProperties
			if ap := bytes.TrimSpace(sub); len(ap) == 0 || ap[0] != '{' {
				sub = json.RawMessage(`{"type":"string"}`)
			}
		}
		g.value(b, sub, depth+1)
	}
	b.WriteByte('}')
}

// array writes minItems items (1 or 2 without it), at most maxItems.
func (g *schemaGen) array(b *bytes.Buffer, s *schema, depth int) {
	n := 1 + g.rng.IntN(2)
	if s.MinItems != nil {
		n = *s.MinItems
	}
	if s.MaxItems != nil {
		n = min(n, *s.MaxItems)
	}
	items := s.Items
	if ai := bytes.TrimSpace(items); bytes.Equal(ai, []byte("false")) {
		n = min(n, len(s.PrefixItems))
	}
	n = max(min(n, 64), 0)
	seen := map[string]bool{}
	b.WriteByte('[')
	for i := range n {
		sub := items
		if i < len(s.PrefixItems) {
			sub = s.PrefixItems[i]
		} else if isNull(sub) {
			sub = json.RawMessage(`{"type":"string"}`)
		}
		var item bytes.Buffer
		for range 16 {
			item.Reset()
			g.value(&item, sub, depth+1)
			if !s.UniqueItems || !seen[item.String()] {
				break
			}
		}
		if s.UniqueItems && seen[item.String()] {
			if s.MinItems == nil || i >= *s.MinItems {
				break // fewer, but unique
			}
		}
		seen[item.String()] = true
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(item.Bytes())
	}
	b.WriteByte(']')
}

// str writes a string: a format's example, or one or two words within
// minLength and maxLength.
func (g *schemaGen) str(b *bytes.Buffer, s *schema) {
	var v string
	switch s.Format {
	case "date-time":
		v = fmt.Sprintf("2025-%02d-%02dT%02d:%02d:00Z", 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60))
	case "date":
		v = fmt.Sprintf("2025-%02d-%02d", 1+g.rng.IntN(12), 1+g.rng.IntN(28))
	case "time":
		v = fmt.Sprintf("%02d:%02d:00Z", g.rng.IntN(24), g.rng.IntN(60))
	case "email", "idn-email":
		v = g.word() + "@example.com"
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		v = "https://example.com/" + g.word()
	case "uuid":
		var h [16]byte
		for i := range h {
			h[i] = byte(g.rng.IntN(256))
		}
		h[6], h[8] = h[6]&0x0f|0x40, h[8]&0x3f|0x80
		v = fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	case "hostname", "idn-hostname":
		v = g.word() + ".example.com"
	case "ipv4":
		v = fmt.Sprintf("192.0.2.%d", 1+g.rng.IntN(254))
	case "ipv6":
		v = fmt.Sprintf("2001:db8::%x", 1+g.rng.IntN(0xfffe))
	default:
		v = g.word()
		if g.rng.IntN(2) == 0 {
			v += " " + g.word()
		}
	}
	if s.MinLength != nil {
		for utf8.RuneCountInString(v) < *s.MinLength {
			v += " " + g.word()
		}
	}
	if s.MaxLength != nil && utf8.RuneCountInString(v) > *s.MaxLength {
		v = strings.TrimRight(string([]rune(v)[:max(*s.MaxLength, 0)]), " ")
		for s.MinLength != nil && utf8.RuneCountInString(v) < *s.MinLength {
			v += "x"
		}
	}
	b.Write(encodeJSON(v))
}

// word is a word of the reply vocabulary.
func (g *schemaGen) word() string { return words[g.rng.IntN(len(words))] }

// number writes a number (an integer if integer) within the bounds, a
// multiple of multipleOf.
func (g *schemaGen) number(b *bytes.Buffer, s *schema, integer bool) {
	lo, hi := new(big.Rat), new(big.Rat)
	loSet, hiSet, loOpen, hiOpen := false, false, false, false
	if r, ok := ratOf(s.Minimum); ok {
		lo, loSet = r, true
	}
	if r, ok := ratOf(s.Maximum); ok {
		hi, hiSet = r, true
	}
	// exclusive reads exclusiveMinimum or exclusiveMaximum: a number (the
	// bound, open) or, in draft 4, true to open minimum or maximum.
	exclusive := func(raw json.RawMessage) (r *big.Rat, open, isNum bool) {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) == 0, bytes.Equal(raw, []byte("false")):
			return nil, false, false
		case bytes.Equal(raw, []byte("true")):
			return nil, true, false
		}
		n := json.Number(raw)
		r, ok := ratOf(&n)
		return r, ok, ok
	}
	if r, open, isNum := exclusive(s.ExclusiveMinimum); isNum {
		if !loSet || r.Cmp(lo) >= 0 {
			lo, loSet, loOpen = r, true, true
		}
	} else if open && loSet {
		loOpen = true
	}
	if r, open, isNum := exclusive(s.ExclusiveMaximum); isNum {
		if !hiSet || r.Cmp(hi) <= 0 {
			hi, hiSet, hiOpen = r, true, true
		}
	} else if open && hiSet {
		hiOpen = true
	}
	hundred := big.NewRat(100, 1)
	switch {
	case !loSet && !hiSet:
		lo, hi = big.NewRat(1, 1), big.NewRat(100, 1)
	case !loSet:
		lo = new(big.Rat).Sub(hi, hundred)
	case !hiSet:
		hi = new(big.Rat).Add(lo, hundred)
	}
	step := big.NewRat(1, 1)
	if !integer {
		step = big.NewRat(1, 100)
	}
	if m, ok := ratOf(s.MultipleOf); ok && m.Sign() > 0 {
		if integer && !m.IsInt() {
			// An integer that is a multiple of p/q: a multiple of p·q.
			m = new(big.Rat).SetInt(new(big.Int).Mul(m.Num(), m.Denom()))
		}
		step = m
	} else if integer {
		step = big.NewRat(1, 1)
	}
	// Candidates are k·step for k in [kLo, kHi].
	kLo := ceilRat(new(big.Rat).Quo(lo, step))
	if loOpen && new(big.Rat).Mul(new(big.Rat).SetInt(kLo), step).Cmp(lo) == 0 {
		kLo.Add(kLo, big.NewInt(1))
	}
	kHi := floorRat(new(big.Rat).Quo(hi, step))
	if hiOpen && new(big.Rat).Mul(new(big.Rat).SetInt(kHi), step).Cmp(hi) == 0 {
		kHi.Sub(kHi, big.NewInt(1))
	}
	k := new(big.Int).Set(kLo)
	if span := new(big.Int).Sub(kHi, kLo); span.Sign() > 0 {
		if span.IsInt64() && span.Int64() < math.MaxInt64 {
			k.Add(k, big.NewInt(g.rng.Int64N(span.Int64()+1)))
		}
	}
	v := new(big.Rat).Mul(new(big.Rat).SetInt(k), step)
	b.WriteString(formatRat(v))
}

// ratOf reads a JSON number exactly.
func ratOf(n *json.Number) (*big.Rat, bool) {
	if n == nil {
		return nil, false
	}
	return new(big.Rat).SetString(string(*n))
}

// floorRat is ⌊r⌋ (Euclidean division by the positive denominator rounds
// towards negative infinity).
func floorRat(r *big.Rat) *big.Int {
	q, _ := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	return q
}

func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// formatRat writes r as a JSON number: an integer, or its decimal
// expansion (exact when it terminates, which multiples of decimal
// literals do).
func formatRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	for prec := 1; prec <= 30; prec++ {
		s := r.FloatString(prec)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(r) == 0 {
			return s
		}
	}
	return r.FloatString(30)
}

// writeCompact writes raw without insignificant white space.
func writeCompact(b *bytes.Buffer, raw json.RawMessage) {
	if err := json.Compact(b, raw); err != nil {
		b.WriteString("null")
	}
}

// jsonPieces splits JSON text into the tokens it is streamed in: a piece
// ends after each of { [ , : outside strings, a new one starts at } and ]
// and, inside strings, at each space. Their concatenation is the text.
func jsonPieces(s string) []string {
	var pieces []string
	start, inStr, esc := 0, false, false
	cut := func(i int) {
		if i > start {
			pieces = append(pieces, s[start:i])
			start = i
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			case ch == ' ':
				cut(i)
			}
			continue
		}
		switch ch {
		case '"':
			inStr = true
		case '{', '[', ',', ':':
			cut(i + 1)
		case '}', ']':
			cut(i)
		}
	}
	cut(len(s))
	return pieces
}
