package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// StoreLocation says where the cold tier the settings name is, for people:
// "s3://bucket/prefix at http://127.0.0.1:9000", "fs /abs/path/objects",
// or "" for type none. Credentials are never part of it.
func StoreLocation(cfg config.Broker) string {
	o := cfg.ObjectStore
	switch o.Type {
	case config.ObjectStoreFS:
		path, err := filepath.Abs(cfg.ObjectStorePath())
		if err != nil {
			path = cfg.ObjectStorePath()
		}
		where := "fs " + path
		if o.Prefix != "" {
			where += ", prefix " + o.Prefix
		}
		return where
	case config.ObjectStoreS3:
		where := "s3://" + o.Bucket
		if o.Prefix != "" {
			where += "/" + o.Prefix
		}
		if o.Endpoint != "" {
			where += " at " + o.Endpoint
		}
		return where
	}
	return ""
}

// storeError is an object store error told in one line: where the store
// is and what to check. The store's own error stays in the chain for
// errors.Is.
type storeError struct {
	msg string
	err error
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.err }

// ExplainStoreError turns an error of the store cfg names into one line
// that says what to check (the bucket, the credentials, the endpoint)
// when the error is of a kind a setting explains, and returns it unchanged
// otherwise.
func ExplainStoreError(cfg config.Broker, err error) error {
	if err == nil || cfg.ObjectStore.Type != config.ObjectStoreS3 {
		return err
	}
	hint := s3.Explain(err)
	if hint == "" {
		return err
	}
	return &storeError{msg: fmt.Sprintf("object store %s: %s", StoreLocation(cfg), hint), err: err}
}

// storeProbeTimeout bounds the one call a broker makes to its store at
// start.
const storeProbeTimeout = 15 * time.Second

// probeStore lists at most one object of the store, so that a bucket that
// does not exist or credentials the store refuses stop the broker at start
// with one line that says so, rather than as upload failures later. An
// endpoint that cannot be reached is only logged: the store may be down
// for a moment, the hot tier works without it and uploads retry.
func probeStore(ctx context.Context, cfg config.Broker, store objstore.Reader, log *slog.Logger) error {
	if cfg.ObjectStore.Type != config.ObjectStoreS3 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	defer cancel()
	errEnough := errors.New("one object is enough")
	err := store.List(ctx, "", func(objstore.ObjectInfo) error { return errEnough })
	if err == nil || errors.Is(err, errEnough) {
		return nil
	}
	explained := ExplainStoreError(cfg, err)
	if _, ok := errors.AsType[*net.OpError](err); ok || errors.Is(err, context.DeadlineExceeded) {
		log.Warn("the object store does not answer; uploads and cold reads retry until it does", "store", StoreLocation(cfg), "err", explained.Error())
		return nil
	}
	return explained
}
