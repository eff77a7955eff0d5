package config

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Unbounded is the value of a Kafka-style limit that is switched off, written
// "-1" (retention.ms=-1 keeps data forever).
const Unbounded = -1

// What the bare parsers accept, quoted in their errors. Callers that know the
// key and its range replace Allowed with something more precise.
const (
	allowedDuration = "a duration such as 90d, 6h, 30m or 500ms (a plain number is milliseconds)"
	allowedMillis   = "a duration such as 90d, 6h, 30m or -1 for unbounded"
	allowedBytes    = "a size such as 512MiB, 4GiB, 64KB or a plain number of bytes"
	allowedBool     = "true or false"
	allowedInt      = "an integer"
)

// maxMillis is the largest millisecond count a time.Duration can hold.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// ParseDuration parses a duration the way people write one: Go's syntax
// ("30m", "1h30m", "500ms", "1.5h") plus days and weeks ("90d", "2w",
// "1d12h"; a day is 24h, calendars are not consulted). A plain integer means
// milliseconds, as in Kafka's *.ms settings. Units are case-sensitive, as in
// Go ("1M" is not a minute, nor a month). Negative durations are refused; a
// caller that gives -1 a meaning handles it first (see ParseMillis).
func ParseDuration(s string) (time.Duration, error) {
	bad := func(reason string) (time.Duration, error) {
		return 0, &Error{Value: s, Allowed: allowedDuration, Reason: reason}
	}
	in := strings.TrimSpace(s)
	switch {
	case in == "":
		return bad("empty")
	case in[0] == '-':
		return bad("negative durations are not allowed")
	case !isDigit(in[0]) && in[0] != '.':
		return bad("") // not a duration at all ("abc"): Allowed says enough
	case isDigits(in):
		ms, err := strconv.ParseInt(in, 10, 64)
		if err != nil || ms > maxMillis {
			return bad("too large")
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	var total time.Duration
	for rest := in; rest != ""; {
		i := 0
		for i < len(rest) && (isDigit(rest[i]) || rest[i] == '.') {
			i++
		}
		num := rest[:i]
		rest = rest[i:]
		j := 0
		for j < len(rest) && !isDigit(rest[j]) && rest[j] != '.' {
			j++
		}
		unit := rest[:j]
		rest = rest[j:]
		if num == "" || num == "." || strings.Count(num, ".") > 1 {
			return bad(fmt.Sprintf("malformed number %q", num))
		}
		if unit == "" {
			return bad(fmt.Sprintf("missing unit after %q", num))
		}
		mult, ok := durationUnit(unit)
		if !ok {
			return bad(fmt.Sprintf("unknown unit %q (want ns, us, ms, s, m, h, d or w)", unit))
		}
		d, ok := scale(num, uint64(mult))
		if !ok || d > uint64(math.MaxInt64-total) {
			return bad("too large")
		}
		total += time.Duration(d)
	}
	return total, nil
}

// durationUnit returns the length of a duration unit.
func durationUnit(u string) (time.Duration, bool) {
	switch u {
	case "ns":
		return time.Nanosecond, true
	case "us", "µs", "μs": // U+00B5 and U+03BC, as Go accepts both
		return time.Microsecond, true
	case "ms":
		return time.Millisecond, true
	case "s":
		return time.Second, true
	case "m":
		return time.Minute, true
	case "h":
		return time.Hour, true
	case "d":
		return 24 * time.Hour, true
	case "w":
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

// ParseMillis parses the value of a Kafka-style *.ms setting into
// milliseconds: "-1" is Unbounded, a plain integer is milliseconds (the whole
// int64 range, as Kafka allows), anything else goes through ParseDuration and
// must be a whole number of milliseconds.
func ParseMillis(s string) (int64, error) {
	in := strings.TrimSpace(s)
	if in == "-1" {
		return Unbounded, nil
	}
	if isDigits(in) {
		ms, err := strconv.ParseInt(in, 10, 64)
		if err != nil {
			return 0, &Error{Value: s, Allowed: allowedMillis, Reason: "too large"}
		}
		return ms, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			c := *e
			c.Allowed = allowedMillis
			return 0, &c
		}
		return 0, err
	}
	if d%time.Millisecond != 0 {
		return 0, &Error{Value: s, Allowed: allowedMillis, Reason: "finer than a millisecond"}
	}
	return int64(d / time.Millisecond), nil
}

// ParseBytes parses a size: a plain number of bytes, or a number with a unit
// KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), or
// B. Units are case-insensitive and may follow a space ("512 MiB"); a
// fraction is fine when the result is whole bytes ("1.5KiB"). "-1" returns
// Unbounded for the callers that allow it; other negatives are refused.
func ParseBytes(s string) (int64, error) {
	bad := func(reason string) (int64, error) {
		return 0, &Error{Value: s, Allowed: allowedBytes, Reason: reason}
	}
	in := strings.TrimSpace(s)
	if in == "-1" {
		return Unbounded, nil
	}
	i := 0
	for i < len(in) && (isDigit(in[i]) || in[i] == '.') {
		i++
	}
	num, unit := in[:i], strings.TrimSpace(in[i:])
	switch {
	case in == "":
		return bad("empty")
	case in[0] == '-':
		return bad("negative sizes are not allowed")
	case num == "":
		return bad("") // not a size at all: Allowed says enough
	case num == "." || strings.Count(num, ".") > 1:
		return bad("malformed number")
	}
	mult, ok := byteUnit(strings.ToLower(unit))
	if !ok {
		return bad(fmt.Sprintf("unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", unit))
	}
	intPart, frac, _ := strings.Cut(num, ".")
	frac = strings.TrimRight(frac, "0")
	whole, ok := scale(intPart, mult)
	if !ok {
		return bad("too large")
	}
	if frac != "" {
		if len(frac) > 19 {
			return bad("too many decimal places")
		}
		f, err := strconv.ParseUint(frac, 10, 64) // at most 19 digits: fits
		if err != nil {
			return bad("malformed number")
		}
		hi, lo := bits.Mul64(f, mult) // high word below 10^k, as in scale
		q, r := bits.Div64(hi, lo, pow10(len(frac)))
		if r != 0 {
			return bad("not a whole number of bytes")
		}
		whole += q
	}
	if whole > math.MaxInt64 {
		return bad("too large")
	}
	return int64(whole), nil
}

// byteUnit returns the size of a lower-cased byte unit.
func byteUnit(u string) (uint64, bool) {
	switch u {
	case "", "b":
		return 1, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	case "tib":
		return 1 << 40, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	}
	return 0, false
}

// scale returns num × mult for a decimal number "12", "1.5" or ".5" with
// ASCII digits, truncating what falls below one unit of the result (Go's
// time.ParseDuration does the same below a nanosecond). ok is false when
// the result does not fit in an int64.
func scale(num string, mult uint64) (uint64, bool) {
	intPart, frac, _ := strings.Cut(num, ".")
	var v uint64
	if intPart != "" {
		n, err := strconv.ParseUint(intPart, 10, 64)
		if err != nil {
			return 0, false
		}
		hi, lo := bits.Mul64(n, mult)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		v = lo
	}
	if len(frac) > 19 {
		frac = frac[:19] // 10^19 still fits in a uint64; further digits are below a unit
	}
	if frac != "" {
		f, err := strconv.ParseUint(frac, 10, 64)
		if err != nil {
			return 0, false
		}
		// f < 10^k, so f×mult < 10^k×2^64 and the high word is below the
		// divisor, which bits.Div64 requires.
		hi, lo := bits.Mul64(f, mult)
		q, _ := bits.Div64(hi, lo, pow10(len(frac)))
		v += q
	}
	return v, v <= math.MaxInt64
}

// pow10 returns 10^k for k ≤ 19.
func pow10(k int) uint64 {
	p := uint64(1)
	for range k {
		p *= 10
	}
	return p
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// FormatDuration renders d in the largest units that keep it exact, in the
// syntax ParseDuration reads back: "7d", "1h30m", "1d12h", "500ms", "0s".
// Weeks are not used: "14d" reads more easily than "2w".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = -u // two's complement: right for math.MinInt64 too
	}
	for _, unit := range []struct {
		name string
		size time.Duration
	}{
		{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
		{"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond},
	} {
		if n := u / uint64(unit.size); n > 0 {
			b.WriteString(strconv.FormatUint(n, 10))
			b.WriteString(unit.name)
			u -= n * uint64(unit.size)
		}
	}
	return b.String()
}

// FormatMillis renders a *.ms value for people: "7d", "1h30m", "100ms".
// Unbounded stays "-1" rather than becoming a word, so what describe prints
// can be pasted back as a value and Kafka users read it as they always have.
// Values too large for a time.Duration (beyond 292 years) are printed as
// plain milliseconds, which ParseMillis also reads back.
func FormatMillis(ms int64) string {
	if ms < 0 || ms > maxMillis {
		return strconv.FormatInt(ms, 10)
	}
	return FormatDuration(time.Duration(ms) * time.Millisecond)
}

// FormatBytes renders a size for people in the largest binary unit that
// keeps it exact ("128MiB", "4GiB"), else as plain bytes ("1048588"), so it
// always parses back to the same number. Unbounded stays "-1", as in
// FormatMillis.
func FormatBytes(n int64) string {
	if n <= 0 {
		return strconv.FormatInt(n, 10)
	}
	for _, unit := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%unit.size == 0 {
			return strconv.FormatInt(n/unit.size, 10) + unit.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseBool accepts true or false in any case, and nothing else: "yes", "1"
// and "on" are refused so that a value means one thing everywhere.
func parseBool(s string) (bool, error) {
	switch in := strings.TrimSpace(s); {
	case strings.EqualFold(in, "true"):
		return true, nil
	case strings.EqualFold(in, "false"):
		return false, nil
	}
	return false, &Error{Value: s, Allowed: allowedBool}
}

// parseInt parses a decimal integer of the given bit size.
func parseInt(s string, bitSize int) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, bitSize)
	if err != nil {
		reason := ""
		if errors.Is(err, strconv.ErrRange) {
			reason = "out of range"
		}
		return 0, &Error{Value: s, Allowed: allowedInt, Reason: reason}
	}
	return n, nil
}
