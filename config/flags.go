package config

import (
	"github.com/spf13/pflag"
)

// BindFlags registers one flag per broker setting on fs, named after the
// YAML path (--node-id, --object-store-type, --gossip-join, ...). Each help
// line shows the default. A value is checked for its type when the flag is
// parsed; ranges and rules between settings are checked by Load. List and
// map flags may be repeated (--gossip-join a:7402 --gossip-join b:7402).
// Load applies only the flags the user set.
func BindFlags(fs *pflag.FlagSet) {
	def := DefaultBroker()
	for _, f := range brokerFields() {
		v := &flagValue{field: f, value: f.get(&def)}
		fl := fs.VarPF(v, f.flag, "", f.help)
		if f.kind == "bool" {
			fl.NoOptDefVal = "true" // --object-store-path-style alone means true
		}
	}
}

// flagValue is a pflag.Value holding a setting in its string form, so Load
// applies flags through the same setters as environment variables.
type flagValue struct {
	field field
	value string
	set   bool // Set was called before: repeated list and map flags append
}

// String returns the value as given (the default before any Set).
func (v *flagValue) String() string { return v.value }

// Set checks s by parsing it into a scratch Broker, then keeps it.
func (v *flagValue) Set(s string) error {
	next := s
	if v.set && (v.field.kind == "strings" || v.field.kind == "key=value") && s != "" {
		if v.value != "" {
			next = v.value + "," + s
		}
	}
	var scratch Broker
	if err := v.field.set(&scratch, next); err != nil {
		return err
	}
	v.value, v.set = next, true
	return nil
}

// Type names the value in help text.
func (v *flagValue) Type() string { return v.field.kind }
