// Command strata is Strata's one binary: `strata serve` runs a broker, and
// every other command is a client of one (topics, produce, consume, bench).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}
