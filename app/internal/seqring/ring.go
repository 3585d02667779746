package seqring

// Ring holds consecutively numbered items, oldest first, and the sum of
// their costs. Sequence numbers start at 1 and never repeat. Kept items are
// always consecutive (the newest is Next()-1), so an item is found by its
// number without a search. Not safe for concurrent use: the owning log
// guards it with its own mutex.
type Ring[T any] struct {
	items []T // items[head:] are kept, oldest first
	head  int
	bytes int64
	next  uint64
	cost  func(*T) int64
}

// New returns an empty ring that charges each item cost(item).
func New[T any](cost func(*T) int64) Ring[T] {
	return Ring[T]{next: 1, cost: cost}
}

// Next is the sequence number the next Push or Skip takes.
func (r *Ring[T]) Next() uint64 { return r.next }

// Len is how many items are kept.
func (r *Ring[T]) Len() int { return len(r.items) - r.head }

// Bytes is the summed cost of the kept items.
func (r *Ring[T]) Bytes() int64 { return r.bytes }

// Slots is how many item slots the storage holds, kept ones and a dead
// prefix not yet compacted: what a test checks to see compaction work.
func (r *Ring[T]) Slots() int { return len(r.items) }

// Oldest is the sequence number of the oldest kept item, or Next() when
// none is kept.
func (r *Ring[T]) Oldest() uint64 { return r.next - uint64(r.Len()) }

// Push keeps v as item Next(); the caller has already numbered v itself
// when T carries its number.
func (r *Ring[T]) Push(v T) {
	r.items = append(r.items, v)
	r.bytes += r.cost(&v)
	r.next++
}

// Skip takes the next number for an item that is not kept, and drops every
// kept item so the kept ones stay consecutive.
func (r *Ring[T]) Skip() {
	r.drop(r.Len())
	r.next++
}

// Trim drops the oldest items while the cost is over max and more than
// keep items are kept.
func (r *Ring[T]) Trim(max int64, keep int) {
	n := 0
	for b := r.bytes; b > max && r.Len()-n > keep; n++ {
		b -= r.cost(&r.items[r.head+n])
	}
	r.drop(n)
}

// Free drops the oldest items until at least want bytes are freed or none
// is left, and returns the bytes freed.
func (r *Ring[T]) Free(want int64) int64 {
	before := r.bytes
	n := 0
	for freed := int64(0); freed < want && n < r.Len(); n++ {
		freed += r.cost(&r.items[r.head+n])
	}
	r.drop(n)
	return before - r.bytes
}

// At is the kept item numbered seq (Oldest() <= seq < Next()).
func (r *Ring[T]) At(seq uint64) *T { return &r.items[r.head+int(seq-r.Oldest())] }

// Front is the oldest kept item, if any.
func (r *Ring[T]) Front() (*T, bool) {
	if r.Len() == 0 {
		return nil, false
	}
	return &r.items[r.head], true
}

// DropWhile drops the oldest items while drop says so, and returns the
// bytes freed.
func (r *Ring[T]) DropWhile(drop func(*T) bool) int64 {
	before := r.bytes
	n := 0
	for n < r.Len() && drop(&r.items[r.head+n]) {
		n++
	}
	r.drop(n)
	return before - r.bytes
}

// Reset drops every item and releases the storage; numbering goes on.
func (r *Ring[T]) Reset() {
	r.drop(r.Len())
	r.items = nil
}

// AppendFrom appends to buf the kept items numbered from seq on, until buf
// holds max items. seq must be at least Oldest().
func (r *Ring[T]) AppendFrom(buf []T, seq uint64, max int) []T {
	for i := r.head + int(seq-r.Oldest()); i < len(r.items) && len(buf) < max; i++ {
		buf = append(buf, r.items[i])
	}
	return buf
}

// drop drops the n oldest items, zeroing them so their payloads can be
// collected, and compacts the storage once the dead prefix dominates
// (amortised O(1) per item).
func (r *Ring[T]) drop(n int) {
	var zero T
	for ; n > 0; n-- {
		old := &r.items[r.head]
		r.bytes -= r.cost(old)
		*old = zero
		r.head++
	}
	if r.head == len(r.items) {
		clear(r.items)
		r.items, r.head = r.items[:0], 0
	}
	if r.head > 1024 && r.head > len(r.items)/2 {
		n := copy(r.items, r.items[r.head:])
		clear(r.items[n:])
		r.items = r.items[:n]
		r.head = 0
	}
}
