package main

// How strata consume prints a record: value, kv or json.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/strata-log/strata/client"
)

// jsonTimeLayout is RFC 3339 with milliseconds, the precision of record
// timestamps.
const jsonTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// recordFormat writes one record as one line.
type recordFormat func(w *bufio.Writer, r *client.Record)

// newRecordFormat returns the writer of --format name.
func newRecordFormat(name, keySeparator string) (recordFormat, error) {
	switch name {
	case "value":
		return func(w *bufio.Writer, r *client.Record) {
			w.Write(r.Value)
			w.WriteByte('\n')
		}, nil
	case "kv":
		return func(w *bufio.Writer, r *client.Record) {
			w.Write(r.Key)
			w.WriteString(keySeparator)
			w.Write(r.Value)
			w.WriteByte('\n')
		}, nil
	case "json":
		var buf []byte
		return func(w *bufio.Writer, r *client.Record) {
			buf = appendRecordJSON(buf[:0], r)
			buf = append(buf, '\n')
			w.Write(buf)
		}, nil
	}
	return nil, usageErrorf("--format %q: want value, kv or json", name)
}

// appendRecordJSON appends r as one JSON object:
//
//	{"topic":"t","partition":0,"offset":7,"timestamp":"2024-05-01T12:00:00.123Z",
//	 "key":"k","value":"v","headers":[{"key":"h","value":"x"}]}
//
// Keys, values and header values are strings when they are valid UTF-8,
// else base64 (standard, padded) under key_b64, value_b64 or, in a header,
// value_b64. A null key or value is JSON null; headers is [] when there are
// none.
func appendRecordJSON(b []byte, r *client.Record) []byte {
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, r.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"timestamp":"`...)
	b = r.Timestamp.UTC().AppendFormat(b, jsonTimeLayout)
	b = append(b, '"', ',')
	b = appendBytesField(b, "key", r.Key)
	b = append(b, ',')
	b = appendBytesField(b, "value", r.Value)
	b = append(b, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, h.Key)
		b = append(b, ',')
		b = appendBytesField(b, "value", h.Value)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendBytesField appends "name":"text", "name_b64":"base64" or
// "name":null.
func appendBytesField(b []byte, name string, v []byte) []byte {
	switch {
	case v == nil:
		b = appendJSONString(b, name)
		return append(b, ":null"...)
	case utf8.Valid(v):
		b = appendJSONString(b, name)
		b = append(b, ':')
		return appendJSONString(b, string(v))
	}
	b = appendJSONString(b, name+"_b64")
	b = append(b, ':', '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendJSONString appends s as a JSON string, without the HTML escaping
// (of <, > and &) json.Marshal does: records are not HTML.
func appendJSONString(b []byte, s string) []byte {
	if plainJSON(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// plainJSON reports whether s needs no escaping inside a JSON string.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
