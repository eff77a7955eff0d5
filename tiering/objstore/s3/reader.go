package s3

import (
	"context"
	"errors"
	"fmt"
	"io"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strata-log/strata/tiering/objstore"
)

// maxStalls bounds the range GETs in one ReadAt that return no byte: a body
// that ends early is asked again for the rest, but a store that keeps
// sending nothing is failing.
const maxStalls = 3

// reader reads ranges of the version of an object that was current at
// Open. Each ReadAt is its own request, so a reader is safe for concurrent
// use and holds no connection between reads.
type reader struct {
	b    *bucket
	key  string
	size int64
	etag string
}

func (r *reader) Size() int64  { return r.size }
func (r *reader) Close() error { return nil }

// ReadAt implements objstore.ObjectReader with GETs of a byte range, sent
// with If-Match on the ETag seen at Open: if the object was replaced since,
// the store refuses rather than mixing two versions into one read.
func (r *reader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fail("read", r.key, nil, err)
	}
	want, tailErr := objstore.ReadRange(r.key, r.size, off, len(p))
	n, stalls := 0, 0
	for n < want {
		got, err := r.get(ctx, p[n:want], off+int64(n))
		n += got
		if err == nil {
			break
		}
		if !errors.Is(err, errShortBody) {
			return n, err
		}
		if got > 0 {
			stalls = 0
		} else if stalls++; stalls == maxStalls {
			return n, fmt.Errorf("s3: read %q: %d range requests in a row returned no data: %w", r.key, maxStalls, err)
		}
	}
	return n, tailErr
}

// errShortBody: a response body ended (or broke) before the range it was
// asked for.
var errShortBody = errors.New("response body shorter than the range")

// get fills p from one range GET at off and returns how much it read.
func (r *reader) get(ctx context.Context, p []byte, off int64) (int, error) {
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)
	in := &s3sdk.GetObjectInput{Bucket: &r.b.bucket, Key: &r.key, Range: &rng}
	if r.etag != "" { // opened with OpenSized: no version to hold it to
		in.IfMatch = quote(r.etag)
	}
	out, err := r.b.client.GetObject(ctx, in)
	if err != nil {
		a := classify(err)
		switch {
		case a.preconditionFailed():
			return 0, fail("read", r.key, objstore.ErrNotFound, fmt.Errorf("replaced since Open: %w", err))
		case a.notFound():
			return 0, fail("read", r.key, objstore.ErrNotFound, err)
		case a.invalidRange():
			// Objects do not shrink; only a replacement the ETag check
			// missed could get here.
			return 0, fail("read", r.key, io.ErrUnexpectedEOF, err)
		}
		return 0, fail("read", r.key, nil, err)
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, p)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return n, fail("read", r.key, nil, ctxErr)
		}
		return n, fmt.Errorf("s3: read %q at %d: %w: %w", r.key, off+int64(n), errShortBody, err)
	}
	return n, nil
}
