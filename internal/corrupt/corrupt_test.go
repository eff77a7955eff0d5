package corrupt

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestMark(t *testing.T) {
	cause := errors.New("crc mismatch")
	marked := Mark(cause)
	if !Is(marked) || !errors.Is(marked, ErrCorruption) {
		t.Fatal("a marked error is not corruption")
	}
	if !errors.Is(marked, cause) {
		t.Fatal("a marked error lost its cause")
	}
	if marked.Error() != cause.Error() {
		t.Fatalf("message %q, want %q", marked.Error(), cause.Error())
	}
	wrapped := fmt.Errorf("segment 7: %w", marked)
	if !Is(wrapped) || !errors.Is(wrapped, cause) {
		t.Fatal("wrapping a marked error loses the mark or the cause")
	}
	if wrapped.Error() != "segment 7: crc mismatch" {
		t.Fatalf("message %q", wrapped.Error())
	}
	if Is(cause) || Is(io.ErrUnexpectedEOF) || Is(nil) {
		t.Fatal("an unmarked error is corruption")
	}
	if Mark(nil) != nil {
		t.Fatal("Mark(nil) is not nil")
	}
	var pe *pathError
	if !errors.As(Mark(&pathError{"seg.log"}), &pe) || pe.path != "seg.log" {
		t.Fatal("errors.As does not see through the mark")
	}
}

type pathError struct{ path string }

func (e *pathError) Error() string { return "damaged " + e.path }
