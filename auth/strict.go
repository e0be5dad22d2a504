package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
)

// ErrClaimType is Verify's error for a token whose header or claims are
// not of the JSON types llmedge's tokens have (it also wraps
// jwt.ErrTokenMalformed).
var ErrClaimType = errors.New("auth: token member of the wrong type")

// ErrCritical is Verify's error for a token whose header has a crit
// member: it names extensions that must be understood (RFC 7515 §4.1.11),
// and llmedge understands none.
var ErrCritical = errors.New("auth: token header has crit")

// member kinds a token's members must have.
type memberKind uint8

const (
	kindString memberKind = iota + 1
	kindNumber
	kindStrings // a string or an array of strings (aud, RFC 7519 §4.1.3)
	kindRefused // never accepted (crit)
)

// headerMembers are the JOSE header members llmedge reads. Any other is
// ignored, as RFC 7515 allows for members not listed in crit: none of
// them (jku, jwk, x5u, ...) is ever used to find a key.
var headerMembers = map[string]memberKind{
	"alg":  kindString,
	"kid":  kindString,
	"typ":  kindString,
	"crit": kindRefused,
}

// claimMembers are the claims the verifier reads, each of the type
// llmedge's issuer writes. Other claims are ignored (RFC 7519 §4).
var claimMembers = map[string]memberKind{
	"iss":          kindString,
	"sub":          kindString,
	"aud":          kindStrings,
	"exp":          kindNumber,
	"nbf":          kindNumber,
	"iat":          kindNumber,
	"jti":          kindString,
	"scope":        kindString,
	"llmedge_tier": kindString,
	"llmedge_idp":  kindString,
}

// checkMembers holds a compact JWS's header and claims to the JSON types
// llmedge's tokens have, before the signature is checked: a NumericDate
// is a JSON number, never a string holding one (which golang-jwt would
// read); iss, sub, jti and scope are strings; aud a string or an array of
// strings; typ, when given, is "JWT"; a header with crit is refused
// (RFC 7515 §4.1.11: its extensions would have to be understood); each
// part is one JSON object that gives no member twice. A token that fails
// is malformed, whoever signed it.
func checkMembers(token string) error {
	head, rest, ok := strings.Cut(token, ".")
	claims, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return fmt.Errorf("%w: not three segments", jwt.ErrTokenMalformed)
	}
	var typ string
	err := checkSegment(head, headerMembers, func(name string, v jsontext.Token) error {
		if name == "typ" {
			typ = v.String()
		}
		return nil
	})
	if err == nil && typ != "" && !strings.EqualFold(typ, "JWT") {
		err = fmt.Errorf("%w: typ %q", ErrClaimType, typ)
	}
	if err == nil {
		err = checkSegment(claims, claimMembers, nil)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
	return nil
}

// checkSegment decodes one base64url segment and checks it is a JSON
// object whose known members have their kinds; seen hears each string
// member read.
func checkSegment(seg string, kinds map[string]memberKind, seen func(string, jsontext.Token) error) error {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return err
	}
	// jsontext's defaults refuse a repeated member and invalid UTF-8.
	d := jsontext.NewDecoder(bytes.NewReader(b))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrClaimType)
	}
	for d.PeekKind() != '}' {
		nt, err := d.ReadToken()
		if err != nil {
			return err
		}
		name := nt.String()
		kind, known := kinds[name]
		if !known {
			if err := d.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if kind == kindRefused {
			return fmt.Errorf("%w (%s)", ErrCritical, name)
		}
		vk := d.PeekKind()
		switch {
		case vk == '"' && (kind == kindString || kind == kindStrings):
			v, err := d.ReadToken()
			if err != nil {
				return err
			}
			if seen != nil {
				if err := seen(name, v); err != nil {
					return err
				}
			}
		case vk == '0' && kind == kindNumber:
			if _, err := d.ReadToken(); err != nil {
				return err
			}
		case vk == '[' && kind == kindStrings:
			if err := stringArray(d); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrClaimType, name, err)
			}
		default:
			if vk == 0 {
				_, err := d.ReadToken()
				return err
			}
			return fmt.Errorf("%w: %s is a JSON %s", ErrClaimType, name, kindName(vk))
		}
	}
	if _, err := d.ReadToken(); err != nil { // the '}'
		return err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return fmt.Errorf("%w: more than one JSON value", ErrClaimType)
	}
	return nil
}

// stringArray reads an array of strings.
func stringArray(d *jsontext.Decoder) error {
	if _, err := d.ReadToken(); err != nil { // '['
		return err
	}
	for d.PeekKind() != ']' {
		if k := d.PeekKind(); k != '"' {
			if k == 0 {
				_, err := d.ReadToken()
				return err
			}
			return fmt.Errorf("an item is a JSON %s", kindName(k))
		}
		if _, err := d.ReadToken(); err != nil {
			return err
		}
	}
	_, err := d.ReadToken() // ']'
	return err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}
