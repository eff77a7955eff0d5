package main

// "Did you mean" for mistyped commands and flags, in one line.

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestDistance is how many edits away a name may be to be suggested.
const suggestDistance = 2

// enableSuggestions makes every command under root suggest its
// subcommands (cobra does so only for the root unless told) and every
// flag error suggest the nearest flag.
func enableSuggestions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = suggestDistance
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%s (see %s --help)", suggestFlag(c, err), c.CommandPath())
	})
}

// suggestFlag adds "did you mean --x?" to an unknown flag error when a
// flag of c (its own or inherited) is near the name typed.
func suggestFlag(c *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return msg
	}
	best, bestDist := "", suggestDistance+1
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(strings.ToLower(name), f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestDist || (d == bestDist && f.Name < best) {
			best, bestDist = f.Name, d
		}
	}
	c.LocalFlags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	if best == "" {
		return msg
	}
	return fmt.Sprintf("%s; did you mean --%s?", msg, best)
}

// editDistance is the Levenshtein distance between a and b, with a swap
// of two neighbouring letters counted as one edit ("lsit" is one from
// "list").
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
