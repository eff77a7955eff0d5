// Package tiering is Strata's cold tier: sealed segments uploaded to an
// object store as self-describing objects, a per-partition manifest that is
// the commit point of what the cold tier holds, retention over it, and the
// reader that serves history back from the bucket through a chunk cache.
//
// Object keys, under the store's prefix (see objstore.WithPrefix):
//
//	<topic>/<topic id>/<partition>/manifest                 the head (replaced)
//	<topic>/<topic id>/<partition>/parts/<seq>-<rand>.part  closed parts (immutable)
//	<topic>/<topic id>/<partition>/segments/<base>-<epoch>-<rand>.seg
//
// The topic id keeps a topic deleted and created again under the same name
// apart from its predecessor's history. FORMAT.md specifies the layout and
// every object's format for readers in other languages; VerifyBucket
// checks a bucket against it.
package tiering
