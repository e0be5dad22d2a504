package openai

import (
	"encoding/json"
	"unicode/utf8"
)

// A request body is checked once with json.Valid, then walked in place by
// the functions below: members and elements are sub-slices of the body,
// so decoding a request costs no map, no reflection and no copy but the
// strings it keeps: half the time and a sixth of the allocations of
// decoding into maps with encoding/json, and fewer allocations than the
// native API's decoding (BenchmarkDecode, BenchmarkDecodeNative). They
// may assume valid JSON; FuzzWalk holds them to encoding/json.

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string whose opening quote is
// at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value that starts at i.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number or a literal: up to the next delimiter.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// eachMember calls fn with the raw key (quotes included) and value of
// each member of the object obj, in order, until fn returns false.
func eachMember(obj []byte, fn func(key, val []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}'
		}
		end := skipString(obj, i)
		key := obj[i:end]
		i = skipSpace(obj, end) + 1 // past ':'
		i = skipSpace(obj, i)
		vend := skipValue(obj, i)
		if !fn(key, obj[i:vend]) {
			return
		}
		i = skipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
}

// eachElement calls fn with each element of the array arr, in order,
// until fn returns false.
func eachElement(arr []byte, fn func(i int, val []byte) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for n := 0; ; n++ {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := skipValue(arr, i)
		if !fn(n, arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i++
		}
	}
}

// countElements is the length of the array arr.
func countElements(arr []byte) int {
	n := 0
	eachElement(arr, func(int, []byte) bool { n++; return true })
	return n
}

// unquote decodes the JSON string raw (quotes included). The common
// string, without escapes, costs one allocation; others are left to
// encoding/json, which also replaces invalid UTF-8 with U+FFFD.
func unquote(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if !hasByte(inner, '\\') && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // raw is a valid JSON string
	return s
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// keyIs reports whether the raw key is name; a key spelled with escapes
// ("mod\u0065l") is decoded first, as encoding/json would.
func keyIs(key []byte, name string) bool {
	if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
		return true
	}
	return hasByte(key, '\\') && unquote(key) == name
}

// keyName is the decoded key.
func keyName(key []byte) string { return unquote(key) }
