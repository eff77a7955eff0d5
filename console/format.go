package console

// How a record's bytes are shown: as text, as JSON (pretty-printed, only
// when the bytes are valid JSON) or as hex, cut at a byte limit. The
// result is plain text; the templates escape it like everything else.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Field formats.
const (
	formatText = "text"
	formatJSON = "json"
	formatHex  = "hex"
)

// maxJSONIndent bounds the value the console parses to pretty-print: a
// larger one is shown as text, cut.
const maxJSONIndent = 1 << 20

// shownField is one key, value or header value as the page shows it.
type shownField struct {
	Null bool
	Text string
	// Size is the field's length in bytes; Cut how many of them are not
	// shown for the byte limit.
	Size int
	Cut  int
	// Note says how the bytes were shown when not as asked: "not JSON",
	// "not UTF-8".
	Note string
}

// showField renders b in format, showing at most limit bytes of it (of
// the rendering, for JSON and hex).
func showField(b []byte, format string, limit int) shownField {
	if b == nil {
		return shownField{Null: true}
	}
	f := shownField{Size: len(b)}
	switch format {
	case formatHex:
		n := min(len(b), limit/2)
		f.Text, f.Cut = hexDump(b[:n]), len(b)-n
		return f
	case formatJSON:
		if len(b) <= maxJSONIndent && json.Valid(b) {
			var out bytes.Buffer
			if json.Indent(&out, b, "", "  ") == nil {
				s := out.String()
				if len(s) > limit {
					s = cutUTF8(s, limit)
					f.Cut = len(b) - min(len(b), len(s)) // approximately what is not shown
					if f.Cut == 0 {
						f.Cut = 1
					}
				}
				f.Text = s
				return f
			}
		}
		f.Note = "not JSON"
	}
	shown := b[:min(len(b), limit)]
	if !utf8.Valid(b) {
		f.Note = strings.TrimPrefix(f.Note+", not UTF-8", ", ")
	}
	f.Text = strings.ToValidUTF8(cutUTF8(string(shown), limit), "\uFFFD")
	f.Cut = len(b) - len(shown)
	return f
}

// cutUTF8 cuts s to at most n bytes without splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// hexDump is b as rows of 16 bytes: hex, then the printable ASCII.
func hexDump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		row := b[i:min(i+16, len(b))]
		sb.WriteString(hex.EncodeToString([]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
		sb.WriteString("  ")
		for j := range 16 {
			if j < len(row) {
				sb.WriteString(hex.EncodeToString(row[j : j+1]))
			} else {
				sb.WriteString("  ")
			}
			sb.WriteByte(' ')
		}
		sb.WriteString(" ")
		for _, c := range row {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}
