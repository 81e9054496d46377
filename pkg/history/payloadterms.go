package history

import (
	"encoding/json"
	"sort"
)

// The payload search (Query.Payload): a job document keeps, in
// payload_terms, one "<field>=<value>" string per top-level scalar field
// of its payload (a string, a number, true, false or null), so that one
// multikey index serves a search by any field's value. Nested objects and
// arrays are not kept, nor fields past these bounds.
const (
	MaxPayloadTerms    = 32
	MaxPayloadKeyLen   = 64
	MaxPayloadValueLen = 128
)

// ValidPayloadField reports whether name can be searched for: a field name
// of 1 to MaxPayloadKeyLen bytes without '='.
func ValidPayloadField(name string) bool {
	if name == "" || len(name) > MaxPayloadKeyLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '=' {
			return false
		}
	}
	return true
}

// PayloadTerm is the term a search by a payload field's value looks for:
// value as the payload holds it written as text (a number as its JSON
// text, a string as it is).
func PayloadTerm(field, value string) string { return field + "=" + value }

// payloadTerms returns the terms of payload (JSON text): none for one that
// is not an object.
func payloadTerms(payload string) []string {
	if len(payload) < 2 || payload[0] != '{' {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(payload), &obj) != nil {
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same terms whatever the map's order
	var terms []string
	for _, k := range keys {
		raw := obj[k]
		if len(terms) == MaxPayloadTerms {
			break
		}
		if !ValidPayloadField(k) || len(raw) == 0 {
			continue
		}
		var v string
		switch raw[0] {
		case '{', '[':
			continue
		case '"':
			if json.Unmarshal(raw, &v) != nil {
				continue
			}
		default:
			v = string(raw) // a number as the payload writes it: 42 matches "42", not "42.0"
		}
		if len(v) <= MaxPayloadValueLen {
			terms = append(terms, PayloadTerm(k, v))
		}
	}
	return terms
}
