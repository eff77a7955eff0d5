package tiering

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// ErrNoColdTopic: the bucket holds no manifest for the topic asked for.
var ErrNoColdTopic = errors.New("tiering: no cold tier for that topic")

// ColdTopic is a topic as its manifests describe it, for restore.
type ColdTopic struct {
	Name       string
	TopicID    string
	Partitions int32
	Config     map[string]string
	// Heads by partition; partitions that never uploaded have none.
	Heads map[int32]*Head
}

// FindTopic reads the manifests of a topic from the bucket: of the topic id
// given, or, when id is empty, of the id whose manifests were written most
// recently (a name can have several ids when a topic was deleted and created
// again and the old cold tier was never removed).
func FindTopic(ctx context.Context, store objstore.Reader, name, id string) (*ColdTopic, error) {
	type seen struct {
		latest time.Time
		parts  map[int32]bool
	}
	ids := map[string]*seen{}
	err := store.List(ctx, name+"/", func(o objstore.ObjectInfo) error {
		// <name>/<id>/<partition>/manifest
		fields := strings.Split(strings.TrimPrefix(o.Key, name+"/"), "/")
		if len(fields) != 3 || fields[2] != "manifest" {
			return nil
		}
		p, err := strconv.ParseInt(fields[1], 10, 32)
		if err != nil || p < 0 {
			return nil
		}
		s := ids[fields[0]]
		if s == nil {
			s = &seen{parts: map[int32]bool{}}
			ids[fields[0]] = s
		}
		s.parts[int32(p)] = true
		if o.ModTime.After(s.latest) {
			s.latest = o.ModTime
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: list %s: %w", name, err)
	}
	if id == "" {
		for candidate, s := range ids {
			if id == "" || s.latest.After(ids[id].latest) {
				id = candidate
			}
		}
	}
	s, ok := ids[id]
	if !ok {
		if id == "" {
			return nil, fmt.Errorf("%w: %q", ErrNoColdTopic, name)
		}
		return nil, fmt.Errorf("%w: %q with id %s", ErrNoColdTopic, name, id)
	}
	t := &ColdTopic{Name: name, TopicID: id, Heads: map[int32]*Head{}}
	var newest uint64
	for p := range s.parts {
		h, _, err := LoadHead(ctx, store, PartitionRef{Topic: name, TopicID: id, Partition: p})
		if err != nil {
			return nil, err
		}
		if h == nil || (h.Empty() && h.Config == nil) {
			continue // a leader took it over but never uploaded: nothing to restore
		}
		t.Heads[p] = h
		t.Partitions = max(t.Partitions, h.Partitions, p+1)
		if h.Generation >= newest {
			newest, t.Config = h.Generation, h.Config
		}
	}
	if len(t.Heads) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoColdTopic, name)
	}
	return t, nil
}
