package console

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzShowField: whatever the bytes, format and limit, showing a field
// does not panic, gives valid UTF-8 (what the page can carry), stays
// within the limit (hex: two characters and a separator per byte, with
// its row framing) and accounts for the bytes it cuts.
func FuzzShowField(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":null}]}`), "json", 16)
	f.Add([]byte("\xff\xfe<script>"), "text", 4)
	f.Add([]byte("héllo wörld"), "text", 2)
	f.Add([]byte{0, 1, 2, 3, 250}, "hex", 100)
	f.Add([]byte(`"\u00e9"`), "json", 1)
	f.Fuzz(func(t *testing.T, b []byte, format string, limit int) {
		if limit < 16 || limit > maxFieldBytes {
			limit = 16 + (limit&0x7fffffff)%maxFieldBytes
		}
		got := showField(b, format, limit)
		if b == nil {
			if !got.Null {
				t.Fatal("nil bytes not shown as null")
			}
			return
		}
		if !utf8.ValidString(got.Text) {
			t.Fatalf("shown text is not UTF-8: %q", got.Text)
		}
		if got.Size != len(b) || got.Cut < 0 || got.Cut > len(b) {
			t.Fatalf("size %d cut %d of %d bytes", got.Size, got.Cut, len(b))
		}
		max := limit + 3*utf8.UTFMax // the replacement of a cut rune
		if format == formatHex {
			max = (limit/2/16 + 1) * 80
		}
		if len(got.Text) > max {
			t.Fatalf("shown %d bytes, limit %d (%s)", len(got.Text), limit, format)
		}
		if got.Cut == 0 && format == formatText && utf8.Valid(b) && got.Text != string(b) {
			t.Fatalf("uncut valid text changed: %q -> %q", b, got.Text)
		}
	})
}

// FuzzParseSettings: settings either parse into keys and values with no
// separator left in a key, or are refused; never a panic.
func FuzzParseSettings(f *testing.F) {
	f.Add("retention.ms=1d\nsegment.bytes=1MiB")
	f.Add("a=b,c=d")
	f.Add("=x")
	f.Add("a=1\na=2")
	f.Fuzz(func(t *testing.T, text string) {
		m, err := parseSettings(text)
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || strings.ContainsAny(k, "=,\n") {
				t.Fatalf("key %q from %q", k, text)
			}
		}
	})
}
