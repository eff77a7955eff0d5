// Package s3 is the objstore.Bucket of an S3-compatible object store (AWS
// S3, MinIO and others) through aws-sdk-go-v2.
//
// Every call takes its context to the SDK, whose standard retryer is the
// only one: the code above the store (the tiering uploader) owns retries
// with backoff, and stacking more here would only multiply the waits.
// Conditional writes use S3's If-None-Match and If-Match headers. Note one
// consequence of any retry of a conditional PUT, by the SDK or a caller: if
// the first attempt succeeded but its answer was lost, the retry finds its
// own write and fails with objstore.ErrPreconditionFailed. Callers already
// read the object again after losing a condition, which settles it.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strata-log/strata/tiering/objstore"
)

// bucket is an objstore.Bucket over one S3 bucket.
type bucket struct {
	client   *s3sdk.Client
	bucket   string
	partSize int64
}

// New returns the Bucket that cfg describes. It does not contact the
// store: a store that is down when a broker starts delays uploads and cold
// reads, and nothing else.
func New(ctx context.Context, cfg Config) (objstore.Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var opts []func(*config.LoadOptions) error
	switch {
	case cfg.Region != "":
		opts = append(opts, config.WithRegion(cfg.Region))
	case cfg.Endpoint != "":
		opts = append(opts, config.WithDefaultRegion("us-east-1"))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: loading AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("s3: no region: set Region in the config, or AWS_REGION")
	}
	client := s3sdk.NewFromConfig(awsCfg, func(o *s3sdk.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Range reads cannot be checked against a whole-object checksum;
		// the SDK would log that it skipped each one.
		o.DisableLogOutputChecksumValidationSkipped = true
		// Nor ask the store for a checksum of what it sends (the SDK's
		// default asks on every GET, and checks a whole object read as a
		// range, 1 MiB segments for one, with a second pass over it): every
		// byte Strata reads back is covered by a CRC-32C of its own format
		// (batches, footers, trailers, manifests; FORMAT.md), which the
		// reader checks anyway.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &bucket{client: client, bucket: cfg.Bucket, partSize: cfg.partSize()}, nil
}

// fail wraps an SDK error of op on key, adding sentinel when it is not nil.
// The SDK error stays in the chain, so errors.Is finds context.Canceled too.
func fail(op, key string, sentinel, err error) error {
	if sentinel != nil {
		return fmt.Errorf("s3: %s %q: %w: %w", op, key, sentinel, err)
	}
	return fmt.Errorf("s3: %s %q: %w", op, key, err)
}

// readFail wraps an error of a read: a missing object is ErrNotFound.
func readFail(op, key string, err error) error {
	if classify(err).notFound() {
		return fail(op, key, objstore.ErrNotFound, err)
	}
	return fail(op, key, nil, err)
}

// Open implements objstore.Reader: one HEAD for the size and ETag, then a
// range GET per ReadAt.
func (b *bucket) Open(ctx context.Context, key string) (objstore.ObjectReader, error) {
	info, err := b.stat(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	return &reader{b: b, key: key, size: info.Size, etag: info.ETag}, nil
}

// OpenSized implements objstore.SizedOpener: no HEAD request, and reads
// without If-Match (objects are immutable; a missing one fails its first
// ReadAt with ErrNotFound). For a replay of small segments it halves the
// requests: one GET an object instead of a HEAD and a GET.
func (b *bucket) OpenSized(_ context.Context, key string, size int64) (objstore.ObjectReader, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("s3: open %q: size %d is negative", key, size)
	}
	return &reader{b: b, key: key, size: size}, nil
}

// Get implements objstore.Reader.
func (b *bucket) Get(ctx context.Context, key string) ([]byte, objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	out, err := b.client.GetObject(ctx, &s3sdk.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return nil, objstore.ObjectInfo{}, readFail("get", key, err)
	}
	defer out.Body.Close()
	var data []byte
	if out.ContentLength != nil {
		data = make([]byte, *out.ContentLength)
		_, err = io.ReadFull(out.Body, data)
	} else {
		data, err = io.ReadAll(out.Body)
	}
	if err != nil {
		return nil, objstore.ObjectInfo{}, fail("get", key, nil, err)
	}
	return data, objstore.ObjectInfo{
		Key:     key,
		Size:    int64(len(data)),
		ETag:    unquote(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Stat implements objstore.Reader.
func (b *bucket) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return b.stat(ctx, "stat", key)
}

func (b *bucket) stat(ctx context.Context, op, key string) (objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	out, err := b.client.HeadObject(ctx, &s3sdk.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return objstore.ObjectInfo{}, readFail(op, key, err)
	}
	return objstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    unquote(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// List implements objstore.Reader with ListObjectsV2, which returns keys in
// UTF-8 byte order: Go's string order.
func (b *bucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 && objstore.ValidateKey(prefix[:i]) != nil {
		// The segments before the last slash would be whole segments of a
		// matching key, and no valid key has them. MinIO refuses such a
		// prefix ("a//") with 400 where S3 lists nothing: list nothing.
		return nil
	}
	pages := s3sdk.NewListObjectsV2Paginator(b.client, &s3sdk.ListObjectsV2Input{
		Bucket: &b.bucket,
		Prefix: &prefix,
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fail("list", prefix, nil, err)
		}
		for _, obj := range page.Contents {
			// A page holds up to 1000 keys; stop within it when asked.
			if err := ctx.Err(); err != nil {
				return fail("list", prefix, nil, err)
			}
			err := fn(objstore.ObjectInfo{
				Key:     aws.ToString(obj.Key),
				Size:    aws.ToInt64(obj.Size),
				ETag:    unquote(obj.ETag),
				ModTime: aws.ToTime(obj.LastModified),
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Create implements objstore.Bucket. Nothing is sent until a part's worth
// is written or Close is called.
func (b *bucket) Create(ctx context.Context, key string) (objstore.Writer, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fail("create", key, nil, err)
	}
	return &writer{ctx: ctx, b: b, key: key}, nil
}

// Put implements objstore.Bucket: IfAbsent is If-None-Match: *, IfMatch is
// If-Match: "etag". The response carries no modification time, so the
// returned ModTime is the local clock's; Stat gives the store's.
func (b *bucket) Put(ctx context.Context, key string, data []byte, opts objstore.WriteOptions) (objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	in := &s3sdk.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if opts.IfMatch != "" {
		in.IfMatch = quote(opts.IfMatch)
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		a := classify(err)
		// S3 answers If-Match on a missing key with 404: the condition
		// "exists with this ETag" is false, which is what callers test.
		if (opts.IfAbsent || opts.IfMatch != "") && (a.preconditionFailed() || (opts.IfMatch != "" && a.notFound())) {
			return objstore.ObjectInfo{}, fail("put", key, objstore.ErrPreconditionFailed, err)
		}
		return objstore.ObjectInfo{}, fail("put", key, nil, err)
	}
	return objstore.ObjectInfo{
		Key:     key,
		Size:    int64(len(data)),
		ETag:    unquote(out.ETag),
		ModTime: time.Now(),
	}, nil
}

// Delete implements objstore.Bucket. S3 answers 204 for a missing key too.
func (b *bucket) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3sdk.DeleteObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil && !classify(err).notFound() {
		return fail("delete", key, nil, err)
	}
	return nil
}

// EnsureBucket creates the configured bucket if it does not exist, and
// reports whether it did. A development convenience (make run-minio); in
// production a missing bucket is more likely a typo, so brokers call it only
// when asked to (object_store.create_bucket).
func EnsureBucket(ctx context.Context, b objstore.Bucket) (bool, error) {
	s, ok := b.(*bucket)
	if !ok {
		return false, errors.New("s3: EnsureBucket needs a bucket made by s3.New")
	}
	_, err := s.client.HeadBucket(ctx, &s3sdk.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		return false, nil
	}
	var nf *types.NotFound
	if !errors.As(err, &nf) {
		return false, fmt.Errorf("s3: head bucket %q: %w", s.bucket, err)
	}
	if _, err := s.client.CreateBucket(ctx, &s3sdk.CreateBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		// Brokers starting together race to create it: losing is fine.
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			return false, nil
		}
		return false, fmt.Errorf("s3: create bucket %q: %w", s.bucket, err)
	}
	return true, nil
}
