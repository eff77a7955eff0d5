//go:build race

package broker

// raceEnabled: the race detector slows the simulation several times over.
const raceEnabled = true
