package objstore

import (
	"fmt"
	"io"
)

// ReadRange applies the ReadAt contract to a read of plen bytes at off in an
// object of size bytes: it returns how many bytes the read can fill and the
// error to return once they are filled. A read that ends at the end exactly
// is complete; one that starts there gets io.EOF; one that runs past it gets
// io.ErrUnexpectedEOF after the bytes that exist, so a caller never mistakes
// a short read for a full one. Every store's ObjectReader uses it, so they
// all answer the edges alike.
func ReadRange(key string, size, off int64, plen int) (int, error) {
	switch {
	case off < 0:
		return 0, fmt.Errorf("objstore: read %q at negative offset %d", key, off)
	case plen == 0:
		return 0, nil
	case off == size:
		return 0, io.EOF
	case off > size:
		return 0, fmt.Errorf("objstore: read %q at %d, past its end at %d: %w", key, off, size, io.ErrUnexpectedEOF)
	case int64(plen) > size-off:
		return int(size - off), fmt.Errorf("objstore: read %q of %d bytes at %d, past its end at %d: %w", key, plen, off, size, io.ErrUnexpectedEOF)
	}
	return plen, nil
}
