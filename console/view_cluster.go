package console

// The cluster view: the brokers (alive or down as this broker's gossip
// sees them, their racks), the controller, partitions under-replicated or
// offline, the bucket's reachability and the cold reads' cache.

import (
	"net/http"
	"sort"

	"github.com/strata-log/strata/broker"
)

type clusterData struct {
	Status      broker.ClusterStatus
	Bucket      bucketState
	Racks       []rackData
	Alive, Down int
	// CacheHitPct is the cold reads' chunk cache hit ratio, -1 before any.
	CacheHitPct int64
}

// rackData is one rack and its brokers.
type rackData struct {
	Name    string
	Brokers []broker.BrokerStatus
}

func (c *console) clusterView(r *http.Request, v *viewer) (view, error) {
	st := v.status(c.src.ClusterStatus())
	d := clusterData{Status: st, CacheHitPct: -1}
	if st.ColdTier {
		d.Bucket = c.bucket.state(r.Context())
		if n := st.CacheHits + st.CacheMisses; n > 0 {
			d.CacheHitPct = int64(st.CacheHits * 100 / n)
		}
	}
	byRack := map[string][]broker.BrokerStatus{}
	for _, b := range st.Brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b)
		if b.Alive {
			d.Alive++
		} else {
			d.Down++
		}
	}
	for name, bs := range byRack {
		d.Racks = append(d.Racks, rackData{Name: name, Brokers: bs})
	}
	sort.Slice(d.Racks, func(i, j int) bool { return d.Racks[i].Name < d.Racks[j].Name })
	return view{Template: "cluster", Title: "Cluster", Nav: "cluster", Live: true, Data: d}, nil
}
