package objstore_test

import (
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/objstoretest"
)

func TestMemory(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return objstore.NewMemory() })
}
