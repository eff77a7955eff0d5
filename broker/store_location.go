package broker

import (
	"path/filepath"

	"github.com/strata-log/strata/config"
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
