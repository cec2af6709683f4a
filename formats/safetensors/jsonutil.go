package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// member is one key of a JSON object with its raw value, in file order.
type member struct {
	Key   string
	Value json.RawMessage
}

// jsonError describes why b is not valid JSON, with the byte offset when known.
func jsonError(b []byte) error {
	var v any
	err := json.Unmarshal(b, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%v (at byte %d)", se, se.Offset)
	}
	return err
}

// objectMembers splits a valid JSON document that must be an object into its members, in
// order, duplicates included. It fails when the document is not an object.
func objectMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("is %s, want a JSON object", jsonKind(b))
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key %v is not a string", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{Key: key, Value: raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// jsonKind names the kind of a raw JSON value for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// rawArray returns the elements of a raw JSON array; ok is false for any other kind (null
// included, which json.Unmarshal would silently accept).
func rawArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	if jsonKind(raw) != "an array" {
		return nil, false
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false
	}
	return elems, true
}

// rawString decodes a raw JSON string; ok is false for any other kind.
func rawString(raw json.RawMessage) (string, bool) {
	if jsonKind(raw) != "a string" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// rawNatural parses a raw JSON number that must be a non-negative integer written without
// fraction or exponent (what the safetensors format and its reference readers accept).
func rawNatural(raw json.RawMessage) (uint64, bool) {
	if jsonKind(raw) != "a number" {
		return 0, false
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}
