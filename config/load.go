package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Load builds the broker configuration from, in rising precedence: the
// defaults, the YAML file at path (none when path is empty; a path that
// does not exist is an error), the STRATA_* environment variables found
// through env (usually os.LookupEnv; nil for none), and the flags of flags
// that the user set (registered with BindFlags; nil for none). The result
// is validated.
//
// Every error is reported with where the value came from: "file
// strata.yaml line 3", "STRATA_NODE_ID" or "--node-id". Loading is all or
// nothing: on any error Load returns a zero Broker, never one with some
// sources applied. A source that sets a list or map setting replaces it
// whole (STRATA_TOPIC_DEFAULTS does not merge with the file's
// topic_defaults).
//
// Only the variables named by EnvNames are read. Any other STRATA_*
// variable is ignored rather than refused, so tooling may share the prefix;
// use UnknownEnv to warn about them, since an ignored typo would otherwise
// go unnoticed.
func Load(path string, env func(string) (string, bool), flags *pflag.FlagSet) (Broker, error) {
	b := DefaultBroker()
	src := sources{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Broker{}, fmt.Errorf("config: reading config file: %w", err)
		}
		if err := decodeFile(data, path, &b, src); err != nil {
			return Broker{}, err
		}
	}
	fields := brokerFields()
	if env != nil {
		for _, f := range fields {
			s, ok := env(f.env)
			if !ok {
				continue
			}
			if err := f.set(&b, s); err != nil {
				return Broker{}, withSource(err, f.env)
			}
			src.set(f.path, f.env)
		}
	}
	if flags != nil {
		for _, f := range fields {
			fl := flags.Lookup(f.flag)
			if fl == nil || !fl.Changed {
				continue
			}
			if err := f.set(&b, flagString(fl)); err != nil {
				return Broker{}, withSource(err, "--"+f.flag)
			}
			src.set(f.path, "--"+f.flag)
		}
	}
	if err := b.Validate(); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Source == "" {
			return Broker{}, withSource(err, src.of(e.Key))
		}
		return Broker{}, err
	}
	return b, nil
}

// flagString returns a flag's value in the form the setters read. Flags
// from BindFlags already hold it; slice flags registered by other means
// print as "[a,b]", so their items are joined instead.
func flagString(fl *pflag.Flag) string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		return strings.Join(sv.GetSlice(), ",")
	}
	return fl.Value.String()
}

// UnknownEnv returns the STRATA_* variables in environ (os.Environ() form,
// "NAME=value") that are not settings, sorted, so the caller can warn about
// them: Load ignores them, and a misspelt variable would otherwise be
// silently without effect.
func UnknownEnv(environ []string) []string {
	known := EnvNames()
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "STRATA_") && !slices.Contains(known, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// sources remembers, per YAML path, where its value came from, so errors
// found by Validate after everything is merged can still name the source.
// topic_defaults entries from a file are tracked per key
// ("topic_defaults.retention.ms") to point at their own line.
type sources map[string]string

// set records that path (and everything below it) now comes from source.
func (s sources) set(path, source string) {
	for p := range s {
		if strings.HasPrefix(p, path+".") {
			delete(s, p)
		}
	}
	s[path] = source
}

// of returns the source of key, or of the nearest setting containing it:
// topic_defaults.retention.ms falls back to topic_defaults. "" means the
// built-in default.
func (s sources) of(key string) string {
	for k := key; k != ""; {
		if src, ok := s[k]; ok {
			return src
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return ""
}

// withSource returns err with Source set when it is an *Error without one.
func withSource(err error, source string) error {
	var e *Error
	if source == "" || !errors.As(err, &e) || e.Source != "" {
		return err
	}
	c := *e
	c.Source = source
	return &c
}
