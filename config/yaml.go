package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeFile applies a YAML config file to b and records in src the line
// every setting came from.
//
// Two passes over the same bytes, on purpose. yaml.v3 decodes into the
// struct with KnownFields(true), so a key the struct lacks is an error.
// Before that, a walk over the node tree checks the same keys against the
// field table, reports problems by YAML path and line ("gossip.secret_key",
// line 12) rather than by Go type, refuses null values (a bare "node_id:"
// would otherwise silently keep the default), and parses scalar values with
// the setters the environment variables and flags use, so a value means
// the same in all three places ("yes" is no more a boolean in the file than
// in STRATA_OBJECT_STORE_PATH_STYLE). YAML merge keys ("<<") are not
// supported.
func decodeFile(data []byte, name string, b *Broker, src sources) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: file %s: %w", ErrInvalid, name, err)
	}
	lines := map[string]int{}
	if err := walkFile(&doc, name, lines); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	next := *b
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil // empty file: nothing to apply
	case err != nil:
		// The walk refuses whatever the decoder refuses, with a better
		// message; this is a safety net in case they ever disagree.
		return fmt.Errorf("%w: file %s: %w", ErrInvalid, name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: file %s: holds more than one YAML document", ErrInvalid, name)
	}
	*b = next
	for path, line := range lines {
		src[path] = fileSource(name, line)
	}
	return nil
}

func fileSource(name string, line int) string { return fmt.Sprintf("file %s line %d", name, line) }

// walkFile checks the document's keys and values against the field table
// and records the line of each setting present.
func walkFile(doc *yaml.Node, name string, lines map[string]int) error {
	if doc.Kind == 0 || (doc.Kind == yaml.DocumentNode && len(doc.Content) == 0) {
		return nil
	}
	root := doc
	if root.Kind == yaml.DocumentNode {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil // "---" alone: an empty document
	}
	w := walker{name: name, lines: lines, fields: map[string]field{}}
	for _, f := range brokerFields() {
		w.fields[f.path] = f
	}
	return w.mapping(root, "")
}

type walker struct {
	name   string
	lines  map[string]int
	fields map[string]field
}

// mapping walks the settings under prefix ("" for the top level).
func (w walker) mapping(n *yaml.Node, prefix string) error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		key := prefix
		if key == "" {
			key = "(top level)"
		}
		return &Error{Key: key, Value: nodeText(n), Allowed: "a mapping of settings", Source: fileSource(w.name, n.Line)}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			return &Error{Key: path, Value: nodeText(resolve(v)), Reason: fmt.Sprintf("set twice (first on line %d)", first),
				Allowed: "each key once", Source: fileSource(w.name, k.Line)}
		}
		seen[k.Value] = k.Line
		// A dot in a key is not a path separator in YAML: "log.level: info"
		// at the top level is not log.level, whatever the table says.
		f, ok := w.fields[path]
		if ok && !strings.Contains(k.Value, ".") {
			if err := w.value(f, v); err != nil {
				return err
			}
			w.lines[path] = k.Line
			if v := resolve(v); f.kind == "key=value" && v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					w.lines[path+"."+v.Content[j].Value] = v.Content[j].Line
				}
			}
			continue
		}
		if w.isSection(path) && !strings.Contains(k.Value, ".") {
			if err := w.mapping(v, path); err != nil {
				return err
			}
			continue
		}
		e := unknownKey(path, w.keysUnder(prefix))
		e.Source = fileSource(w.name, k.Line)
		return e
	}
	return nil
}

// value checks one setting's value node.
func (w walker) value(f field, n *yaml.Node) error {
	n = resolve(n)
	fail := func(reason string) error {
		return &Error{Key: f.path, Value: nodeText(n), Allowed: kindAllowed(f.kind), Reason: reason, Source: fileSource(w.name, n.Line)}
	}
	var scratch Broker
	switch {
	case f.kind == "strings" || f.kind == "key=value":
		if n.ShortTag() == "!!null" {
			return nil // an empty list or map
		}
		if err := n.Decode(f.ptr(&scratch)); err != nil {
			return fail("")
		}
	case n.Kind != yaml.ScalarNode:
		return fail("")
	case n.ShortTag() == "!!null":
		return fail(`empty value; write "" for an empty string, or leave the key out for the default`)
	case f.kind == "int" && n.ShortTag() != "!!int", f.kind == "bool" && n.ShortTag() != "!!bool":
		// Quoted numbers and YAML 1.1 booleans ("yes") decode as strings,
		// which the struct's int and bool fields refuse: say so here.
		return fail("")
	default:
		if err := f.set(&scratch, n.Value); err != nil {
			return withSource(err, fileSource(w.name, n.Line))
		}
	}
	return nil
}

// isSection reports whether path is a mapping of settings such as "raft".
func (w walker) isSection(path string) bool {
	for p := range w.fields {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// keysUnder lists the keys allowed directly under prefix, in table order.
func (w walker) keysUnder(prefix string) []string {
	var out []string
	for _, f := range brokerFields() {
		rest, ok := f.path, prefix == ""
		if !ok {
			rest, ok = strings.CutPrefix(f.path, prefix+".")
		}
		if !ok {
			continue
		}
		key, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	if prefix != "" {
		for i := range out {
			out[i] = prefix + "." + out[i]
		}
	}
	return out
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// kindAllowed describes the values of a field type, for errors about the
// shape of a YAML value.
func kindAllowed(kind string) string {
	switch kind {
	case "int":
		return allowedInt
	case "bool":
		return allowedBool
	case "duration":
		return allowedDuration
	case "bytes":
		return allowedBytes
	case "strings":
		return "a list of strings such as [broker1:7402, broker2:7402]"
	case "key=value":
		return "a mapping of topic keys to values, such as {retention.ms: 30d}"
	}
	return "a string"
}
