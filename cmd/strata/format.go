package main

// How strata consume and replay print a record: value, kv, json or a
// kcat-style format string.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-log/strata/client"
)

// jsonTimeLayout is RFC 3339 with milliseconds, the precision of record
// timestamps.
const jsonTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// recordFormat writes one record.
type recordFormat func(w *bufio.Writer, r *client.Record)

// formatHelp describes what --format takes, for flag help.
const formatHelp = `value, kv, json, or a format string with % directives as kcat's -f ('%k=%s\n'; see --help)`

// newRecordFormat returns the writer of --format name: value, kv (the key,
// keySeparator, the value) and json end each record with delimiter; a
// format string (anything with a %) writes exactly what it says.
func newRecordFormat(name, keySeparator, delimiter string) (recordFormat, error) {
	switch name {
	case "value":
		return func(w *bufio.Writer, r *client.Record) {
			w.Write(r.Value)
			w.WriteString(delimiter)
		}, nil
	case "kv":
		return func(w *bufio.Writer, r *client.Record) {
			w.Write(r.Key)
			w.WriteString(keySeparator)
			w.Write(r.Value)
			w.WriteString(delimiter)
		}, nil
	case "json":
		var buf []byte
		return func(w *bufio.Writer, r *client.Record) {
			buf = appendRecordJSON(buf[:0], r)
			buf = append(buf, delimiter...)
			w.Write(buf)
		}, nil
	}
	if strings.Contains(name, "%") {
		return parseFormatString(name)
	}
	return nil, usageErrorf("--format %q: want %s", name, formatHelp)
}

// formatField is one % directive of a format string.
type formatField byte

// parseFormatString compiles a kcat-style format string: %s value, %k key,
// %S and %K their lengths in bytes (-1 when null), %t topic, %p partition,
// %o offset, %T timestamp in epoch milliseconds, %h headers as
// key=value pairs separated by commas, %% a percent sign; \n, \r, \t,
// \0 and \\ are escapes. Nothing is added after a record: end the string
// with \n for one record a line.
func parseFormatString(spec string) (recordFormat, error) {
	text, err := unescape(spec)
	if err != nil {
		return nil, usageErrorf("--format %q: %v", spec, err)
	}
	// ops alternate between literal text and fields: a field is the byte
	// after a '%'.
	type op struct {
		lit   string
		field formatField
	}
	var ops []op
	var lit strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '%' {
			lit.WriteByte(text[i])
			continue
		}
		if i+1 == len(text) {
			return nil, usageErrorf("--format %q ends in a lone %%: write %%%% for a percent sign", spec)
		}
		i++
		switch c := text[i]; c {
		case '%':
			lit.WriteByte('%')
		case 's', 'S', 'k', 'K', 't', 'p', 'o', 'T', 'h':
			ops = append(ops, op{lit: lit.String(), field: formatField(c)})
			lit.Reset()
		default:
			return nil, usageErrorf("--format %q: unknown directive %%%c; want %%s (value), %%k (key), %%S, %%K (their lengths), %%t (topic), %%p (partition), %%o (offset), %%T (timestamp ms), %%h (headers) or %%%%", spec, c)
		}
	}
	tail := lit.String()
	num := make([]byte, 0, 20) // room for any int64: no allocation per number
	return func(w *bufio.Writer, r *client.Record) {
		for _, o := range ops {
			w.WriteString(o.lit)
			switch o.field {
			case 's':
				w.Write(r.Value)
			case 'k':
				w.Write(r.Key)
			case 'S':
				w.Write(strconv.AppendInt(num[:0], nullableLen(r.Value), 10))
			case 'K':
				w.Write(strconv.AppendInt(num[:0], nullableLen(r.Key), 10))
			case 't':
				w.WriteString(r.Topic)
			case 'p':
				w.Write(strconv.AppendInt(num[:0], int64(r.Partition), 10))
			case 'o':
				w.Write(strconv.AppendInt(num[:0], r.Offset, 10))
			case 'T':
				w.Write(strconv.AppendInt(num[:0], r.Timestamp.UnixMilli(), 10))
			case 'h':
				for i, h := range r.Headers {
					if i > 0 {
						w.WriteByte(',')
					}
					w.WriteString(h.Key)
					w.WriteByte('=')
					w.Write(h.Value)
				}
			}
		}
		w.WriteString(tail)
	}, nil
}

// nullableLen is len(b), or -1 for a null key or value.
func nullableLen(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// unescape replaces the escapes \n, \r, \t, \0 and \\ of a format string or
// delimiter given on the command line, where typing the bytes is awkward.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New(`ends in a lone \: write \\ for a backslash`)
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		case '\\':
			b.WriteByte('\\')
		default:
			return "", fmt.Errorf(`unknown escape \%c: want \n, \r, \t, \0 or \\`, s[i])
		}
	}
	return b.String(), nil
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
