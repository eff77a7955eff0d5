package main

// --format for the listings and descriptions (topic, group, cluster, bucket,
// acl, user): text for people, json for programs. The JSON documents are
// structs of their own with snake_case names, documented in docs/CLI.md,
// so that renaming a Go field or a column never changes what a script
// reads.

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"
)

// outputFlag is the value of a listing's --format flag.
type outputFlag string

const (
	outputText outputFlag = "text"
	outputJSON outputFlag = "json"
)

// addOutputFlag registers --format on cmd, text by default.
func addOutputFlag(cmd *cobra.Command, f *outputFlag) {
	*f = outputText
	cmd.Flags().StringVar((*string)(f), "format", string(outputText), "output format: text (for people) or json (one document, for programs; see docs/CLI.md)")
}

// check refuses a --format value other than text or json, before the
// command asks a broker anything.
func (f outputFlag) check() error {
	if f != outputText && f != outputJSON {
		return usageErrorf("--format %q: want text or json", string(f))
	}
	return nil
}

// writeJSON writes v as one indented JSON document and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
