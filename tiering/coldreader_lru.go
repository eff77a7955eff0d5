package tiering

import "container/list"

// lru is a map that keeps its most recently used entries within a budget:
// the sum of their costs (bytes, or 1 each for a bound by count). It is not
// safe for concurrent use; its owner holds a lock around every call, and
// onEvict runs under that lock.
type lru[K comparable, V any] struct {
	limit   int64
	used    int64
	order   list.List // of *lruEntry; front is the most recently used
	items   map[K]*list.Element
	onEvict func(K, V) // may be nil
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

func newLRU[K comparable, V any](limit int64, onEvict func(K, V)) *lru[K, V] {
	return &lru[K, V]{limit: limit, items: make(map[K]*list.Element), onEvict: onEvict}
}

// get returns the entry for k and marks it used.
func (l *lru[K, V]) get(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

// peek returns the entry for k without marking it used.
func (l *lru[K, V]) peek(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	return e.Value.(*lruEntry[K, V]).val, true
}

// add stores v under k, replacing (and evicting) any entry k had, then
// evicts the least recently used entries until the costs fit the limit. An
// entry that alone costs more than the limit is not stored: add reports
// false and v is the caller's to dispose of.
func (l *lru[K, V]) add(k K, v V, cost int64) bool {
	if cost > l.limit {
		return false
	}
	l.remove(k)
	l.items[k] = l.order.PushFront(&lruEntry[K, V]{key: k, val: v, cost: cost})
	l.used += cost
	for l.used > l.limit {
		l.removeElement(l.order.Back())
	}
	return true
}

// demote marks k's entry, if any, the least recently used: the next to go.
func (l *lru[K, V]) demote(k K) {
	if e, ok := l.items[k]; ok {
		l.order.MoveToBack(e)
	}
}

// remove evicts k's entry, if any.
func (l *lru[K, V]) remove(k K) {
	if e, ok := l.items[k]; ok {
		l.removeElement(e)
	}
}

func (l *lru[K, V]) removeElement(e *list.Element) {
	ent := l.order.Remove(e).(*lruEntry[K, V])
	delete(l.items, ent.key)
	l.used -= ent.cost
	if l.onEvict != nil {
		l.onEvict(ent.key, ent.val)
	}
}

// clear evicts every entry.
func (l *lru[K, V]) clear() {
	for l.order.Len() > 0 {
		l.removeElement(l.order.Back())
	}
}

func (l *lru[K, V]) len() int { return l.order.Len() }

// cost is the sum of the entries' costs.
func (l *lru[K, V]) cost() int64 { return l.used }
