package tiering

import (
	"slices"
	"testing"
)

func TestLRUEvictsLeastRecentlyUsedWithinItsBudget(t *testing.T) {
	var evicted []string
	l := newLRU(10, func(k string, _ int) { evicted = append(evicted, k) })
	l.add("a", 1, 4)
	l.add("b", 2, 4)
	l.get("a") // b is now the least recently used
	l.add("c", 3, 4)
	if !slices.Equal(evicted, []string{"b"}) || l.cost() != 8 || l.len() != 2 {
		t.Fatalf("evicted %v, cost %d, len %d", evicted, l.cost(), l.len())
	}
	if l.add("huge", 4, 11) {
		t.Fatal("an entry over the whole budget was stored")
	}
	l.add("a", 5, 2) // replacing evicts the old entry
	if v, _ := l.peek("a"); v != 5 || l.cost() != 6 || !slices.Equal(evicted, []string{"b", "a"}) {
		t.Fatalf("a=%d cost %d evicted %v", v, l.cost(), evicted)
	}
	l.remove("c")
	l.clear()
	if l.len() != 0 || l.cost() != 0 || !slices.Equal(evicted, []string{"b", "a", "c", "a"}) {
		t.Fatalf("len %d cost %d evicted %v", l.len(), l.cost(), evicted)
	}
}
