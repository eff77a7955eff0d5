package hotlog

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/internal/corrupt"
)

// TestCorruptionIsMarked: damaged log files fail Open with an error that
// passes the one check callers use, corrupt.Is, as well as ErrCorrupt.
func TestCorruptionIsMarked(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	fillLog(t, l, 40)
	first := l.Segments()[0]
	l.Close()
	flipByte(t, first.Path, first.Size-5)
	_, err := Open(dir, testOptions(DiskFS{}))
	if !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
		t.Fatalf("Open of a damaged sealed segment: %v, want corruption", err)
	}
	if _, err := decodeState([]byte("SLST")); !corrupt.Is(err) {
		t.Fatalf("a damaged checkpoint: %v, want corruption", err)
	}
	if corrupt.Is(ErrClosed) || corrupt.Is(ErrLogFailed) {
		t.Fatal("a closed or failed log is marked as corruption")
	}
}
