package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strata-log/strata/tiering/objstore"
)

// abortTimeout bounds the AbortMultipartUpload that cleans up after a
// failed or cancelled write. It runs on a context detached from the
// write's, which may be the one that ended: an upload left open costs
// storage until a lifecycle rule collects it.
const abortTimeout = 30 * time.Second

// writer streams an object. It buffers up to one part: an object that fits
// in it goes up in one PutObject at Close; a larger one becomes a
// multipart upload, begun when the first part overflows, with a part
// uploaded each time the buffer fills and the upload completed at Close.
// S3 shows neither until it is complete, so readers never see a partial
// object.
//
// Parts are uploaded in the goroutine that calls Write, so a Writer holds
// at most one part in memory and needs no goroutine of its own; an
// uploader that wants more throughput runs several Writers.
type writer struct {
	ctx context.Context
	b   *bucket
	key string
	buf []byte

	uploadID *string // set once the multipart upload has begun
	parts    []types.CompletedPart

	closed, aborted bool
}

func (w *writer) usable(op string) error {
	switch {
	case w.closed:
		return fmt.Errorf("s3: %s %q: writer already closed", op, w.key)
	case w.aborted:
		return fmt.Errorf("s3: %s %q: %w", op, w.key, objstore.ErrAborted)
	}
	if err := w.ctx.Err(); err != nil {
		return errors.Join(fmt.Errorf("s3: %s %q: %w: %w", op, w.key, objstore.ErrAborted, err), w.abort())
	}
	return nil
}

// Write implements objstore.Writer.
func (w *writer) Write(p []byte) (int, error) {
	if err := w.usable("write"); err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		// A full buffer is sent only once more bytes come: an object of
		// exactly one part then still goes up in one PUT at Close.
		if len(w.buf) == int(w.b.partSize) {
			if err := w.uploadPart(); err != nil {
				return written, errors.Join(err, w.abort())
			}
		}
		n := min(len(p), int(w.b.partSize)-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		written += n
	}
	return written, nil
}

// uploadPart sends the buffer as the next part, beginning the multipart
// upload if it is the first.
func (w *writer) uploadPart() error {
	if len(w.parts) == maxParts {
		return fmt.Errorf("s3: write %q: more than %d parts of %d bytes: %w", w.key, maxParts, w.b.partSize, objstore.ErrAborted)
	}
	if w.uploadID == nil {
		out, err := w.b.client.CreateMultipartUpload(w.ctx, &s3sdk.CreateMultipartUploadInput{
			Bucket:            &w.b.bucket,
			Key:               &w.key,
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		if err != nil {
			return fail("write", w.key, objstore.ErrAborted, err)
		}
		w.uploadID = out.UploadId
	}
	num := aws.Int32(int32(len(w.parts) + 1))
	out, err := w.b.client.UploadPart(w.ctx, &s3sdk.UploadPartInput{
		Bucket:            &w.b.bucket,
		Key:               &w.key,
		UploadId:          w.uploadID,
		PartNumber:        num,
		Body:              bytes.NewReader(w.buf),
		ContentLength:     aws.Int64(int64(len(w.buf))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	})
	if err != nil {
		return fail("write", w.key, objstore.ErrAborted, err)
	}
	w.parts = append(w.parts, types.CompletedPart{
		PartNumber:    num,
		ETag:          out.ETag,
		ChecksumCRC32: out.ChecksumCRC32,
	})
	w.buf = w.buf[:0]
	return nil
}

// Close implements objstore.Writer. After a failed Close the upload is
// aborted and nothing is stored.
func (w *writer) Close() error {
	if w.closed {
		return nil
	}
	if err := w.usable("close"); err != nil {
		return err
	}
	if err := w.commit(); err != nil {
		return errors.Join(err, w.abort())
	}
	w.closed = true
	w.buf = nil
	return nil
}

func (w *writer) commit() error {
	if w.uploadID == nil {
		_, err := w.b.client.PutObject(w.ctx, &s3sdk.PutObjectInput{
			Bucket:        &w.b.bucket,
			Key:           &w.key,
			Body:          bytes.NewReader(w.buf),
			ContentLength: aws.Int64(int64(len(w.buf))),
		})
		if err != nil {
			return fail("close", w.key, nil, err)
		}
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.uploadPart(); err != nil {
			return err
		}
	}
	_, err := w.b.client.CompleteMultipartUpload(w.ctx, &s3sdk.CompleteMultipartUploadInput{
		Bucket:          &w.b.bucket,
		Key:             &w.key,
		UploadId:        w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
	})
	if err != nil {
		return fail("close", w.key, nil, err)
	}
	return nil
}

// Abort implements objstore.Writer. It reports a failure to abort the
// multipart upload, which then lingers in the bucket (invisible, but
// billed) until a lifecycle rule removes it.
func (w *writer) Abort() error {
	return w.abort()
}

func (w *writer) abort() error {
	if w.closed || w.aborted {
		return nil
	}
	w.aborted = true
	w.buf = nil
	if w.uploadID == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), abortTimeout)
	defer cancel()
	_, err := w.b.client.AbortMultipartUpload(ctx, &s3sdk.AbortMultipartUploadInput{
		Bucket:   &w.b.bucket,
		Key:      &w.key,
		UploadId: w.uploadID,
	})
	if err != nil && !classify(err).notFound() {
		return fail("abort", w.key, nil, err)
	}
	return nil
}
