package simulator

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestGenerateJSON generates values for schemas of every keyword the
// generator covers, with many seeds, and validates them with a real JSON
// Schema validator (formats asserted).
func TestGenerateJSON(t *testing.T) {
	tests := []struct{ name, schema string }{
		{"empty object", `{"type":"object"}`},
		{"no type", `{}`},
		{"true", `true`},
		{"required only", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"]}`},
		{"all types", `{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},` +
			`"b":{"type":"boolean"},"z":{"type":"null"},"a":{"type":"array"},"o":{"type":"object"}},"required":["s","n","i","b","z","a","o"],"additionalProperties":false}`},
		{"enum and const", `{"type":"object","properties":{"e":{"enum":["x",2,null,{"k":[1]}]},"c":{"const":{"fixed":true}},"ec":{"type":"string","enum":["only"]}},"required":["e","c","ec"]}`},
		{"string lengths", `{"type":"object","properties":{"short":{"type":"string","maxLength":3},"long":{"type":"string","minLength":40},` +
			`"exact":{"type":"string","minLength":5,"maxLength":5},"empty":{"type":"string","maxLength":0}},"required":["short","long","exact","empty"]}`},
		{"formats", `{"type":"object","properties":{"dt":{"type":"string","format":"date-time"},"d":{"type":"string","format":"date"},` +
			`"t":{"type":"string","format":"time"},"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},` +
			`"id":{"type":"string","format":"uuid"},"h":{"type":"string","format":"hostname"},"v4":{"type":"string","format":"ipv4"},` +
			`"v6":{"type":"string","format":"ipv6"}},"required":["dt","d","t","e","u","id","h","v4","v6"]}`},
		{"number bounds", `{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":-3},"b":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":0.05},` +
			`"c":{"type":"integer","minimum":1000000},"d":{"type":"number","maximum":-1e6},"e":{"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":11},` +
			`"f":{"type":"integer","minimum":7,"maximum":7}},"required":["a","b","c","d","e","f"]}`},
		{"multipleOf", `{"type":"object","properties":{"q":{"type":"number","multipleOf":0.25,"minimum":1,"maximum":2},"r":{"type":"integer","multipleOf":5},` +
			`"s":{"type":"number","multipleOf":0.1},"t":{"type":"integer","multipleOf":2.5,"minimum":1,"maximum":100},"u":{"type":"number","multipleOf":0.01,"exclusiveMinimum":0.5,"maximum":0.52}},"required":["q","r","s","t","u"]}`},
		{"draft 4 exclusive bounds", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"x":{"type":"integer","minimum":1,"exclusiveMinimum":true,"maximum":3,"exclusiveMaximum":true}},"required":["x"]}`},
		{"arrays", `{"type":"object","properties":{"few":{"type":"array","items":{"type":"integer"},"maxItems":1},"many":{"type":"array","items":{"type":"string"},"minItems":5},` +
			`"none":{"type":"array","maxItems":0},"uniq":{"type":"array","items":{"type":"boolean"},"uniqueItems":true,"minItems":2},` +
			`"tuple":{"type":"array","prefixItems":[{"type":"integer"},{"type":"string","format":"date"}],"items":false,"minItems":2}},"required":["few","many","none","uniq","tuple"]}`},
		{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},"address":{"type":"object",` +
			`"properties":{"zip":{"type":"string","minLength":5,"maxLength":5}},"required":["zip"],"additionalProperties":false}},"required":["name","address"]},` +
			`"items":{"type":"array","minItems":1,"items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"]}}},"required":["user","items"]}`},
		{"type lists and nullable", `{"type":"object","properties":{"a":{"type":["null","string"]},"b":{"type":["integer","null"],"minimum":3},"c":{"type":["null"]}},"required":["a","b","c"]}`},
		{"refs", `{"type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},` +
			`"definitions":{"name":{"type":"string","minLength":2}},"properties":{"from":{"$ref":"#/$defs/pt"},"to":{"$ref":"#/$defs/pt"},"label":{"$ref":"#/definitions/name"}},"required":["from","to","label"]}`},
		{"recursive ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"}`},
		{"anyOf and oneOf", `{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"string","format":"email"}]},` +
			`"o":{"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},{"type":"string"}]}},"required":["a","o"]}`},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`},
		{"minProperties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"minProperties":2}`},
		{"additionalProperties schema", `{"type":"object","required":["x","y"],"additionalProperties":{"type":"integer","maximum":0}}`},
		{"escaped names", `{"type":"object","properties":{"a \"quoted\" key":{"type":"string"},"ünï":{"type":"string"},"<html>&":{"type":"string"}},"required":["a \"quoted\" key","ünï","<html>&"]}`},
		{"OpenAI strict function", `{"type":"object","properties":{"location":{"type":"string","description":"City and country e.g. Bogotá, Colombia"},` +
			`"units":{"type":["string","null"],"enum":["celsius","fahrenheit"]}},"required":["location","units"],"additionalProperties":false}`},
		{"top-level array", `{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":3,"maxItems":3}`},
		{"top-level string", `{"type":"string","format":"date"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			for seed := range uint64(25) {
				v := generateJSON(json.RawMessage(tt.schema), rand.New(rand.NewPCG(seed, 99)))
				validateJSON(t, []byte(tt.schema), v)
				if again := generateJSON(json.RawMessage(tt.schema), rand.New(rand.NewPCG(seed, 99))); again != v {
					t.Fatalf("seed %d: %s then %s", seed, v, again)
				}
				if p := jsonPieces(v); strings.Join(p, "") != v {
					t.Fatalf("pieces %q do not make %s", p, v)
				}
				var compact bytes.Buffer
				if json.Compact(&compact, []byte(v)) != nil || compact.String() != v {
					t.Fatalf("%s is not compact JSON", v)
				}
				seen[v] = true
			}
			if t.Failed() {
				return
			}
			t.Logf("%d distinct values, e.g. %s", len(seen), generateJSON(json.RawMessage(tt.schema), rand.New(rand.NewPCG(1, 99))))
		})
	}
	if got := generateJSON(nil, rand.New(rand.NewPCG(1, 2))); got != "{}" {
		t.Errorf("no parameters: %s, want {}", got)
	}
}

// TestValidatorRejects makes sure the validator used above does reject
// what it should, so that its passing means something.
func TestValidatorRejects(t *testing.T) {
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"object","properties":{"e":{"type":"string","format":"email"},"n":{"type":"number","multipleOf":0.1}},"required":["e","n"]}`))
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch := c.MustCompile("mem://s.json")
	for _, bad := range []string{`{}`, `{"e":"no at sign","n":0.1}`, `{"e":"a@b.c","n":0.15}`, `{"e":1,"n":1}`} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if sch.Validate(v) == nil {
			t.Errorf("%s validated", bad)
		}
	}
}

func TestJSONPieces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`{}`, []string{"{", "}"}},
		{`{"city":"new york","n":3}`, []string{"{", `"city":`, `"new`, ` york",`, `"n":`, "3", "}"}},
		{`[1,[2],{"a":"b:c, d"}]`, []string{"[", "1,", "[", "2", "],", "{", `"a":`, `"b:c,`, ` d"`, "}", "]"}},
		{`{"q":"say \"hi there\""}`, []string{"{", `"q":`, `"say`, ` \"hi`, ` there\""`, "}"}},
		{`"a b"`, []string{`"a`, ` b"`}},
	}
	for _, tt := range tests {
		if got := jsonPieces(tt.in); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("jsonPieces(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestGenerateJSONOddSchemas: schemas that are wrong or unsatisfiable get
// some value, never a panic or invalid JSON.
func TestGenerateJSONOddSchemas(t *testing.T) {
	for _, s := range []string{
		`false`, `{"type":5}`, `{"type":"array","minItems":-1}`, `{"type":"string","minLength":-5,"maxLength":-2}`,
		`{"type":"integer","minimum":10,"maximum":1}`, `{"type":"number","multipleOf":0}`, `{"type":"number","multipleOf":-2}`,
		`{"$ref":"#/nope"}`, `{"$ref":"http://example.com/s.json"}`, `{"$ref":"#"}`, `{"enum":[]}`, `{"properties":{"a":5},"required":["a"]}`,
		`{"type":"object","required":["a"],"additionalProperties":false}`, `{"type":"array","items":false,"minItems":3}`,
		`{"anyOf":[]}`, `{"oneOf":[{"type":"null"}]}`, `{"allOf":[5]}`, `{"type":"integer","minimum":1e300}`,
		`{"type":"number","minimum":"x"}`, `{"type":"object","minProperties":1000}`, `[1,2]`, `"str"`,
	} {
		v := generateJSON(json.RawMessage(s), rand.New(rand.NewPCG(1, 2)))
		if !json.Valid([]byte(v)) {
			t.Errorf("schema %s: invalid JSON %q", s, v)
		}
	}
}
