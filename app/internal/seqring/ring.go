package seqring

import "reflect"

// blockBytes is the size of one block of a ring's storage: items live in
// fixed blocks, so a ring holds at most one partly used block beyond its
// items (a slice grown by doubling would hold up to twice them, and copy
// them all on each growth), and an emptied block is freed at once.
const blockBytes = 1 << 10

// Ring holds consecutively numbered items, oldest first, and the sum of
// their costs. Sequence numbers start at 1 and never repeat. Kept items are
// always consecutive (the newest is Next()-1), so an item is found by its
// number without a search. Not safe for concurrent use: the owning log
// guards it with its own mutex.
type Ring[T any] struct {
	blocks   [][]T // each perBlock long; the items are blocks[0][head:] onwards, n of them
	head     int
	n        int
	perBlock int
	spare    []T // one emptied block, kept for the next
	bytes    int64
	next     uint64
	cost     func(*T) int64
}

// New returns an empty ring that charges each item cost(item).
func New[T any](cost func(*T) int64) Ring[T] {
	size := int(reflect.TypeFor[T]().Size())
	return Ring[T]{next: 1, cost: cost, perBlock: max(16, blockBytes/max(size, 1))}
}

// Next is the sequence number the next Push or Skip takes.
func (r *Ring[T]) Next() uint64 { return r.next }

// Len is how many items are kept.
func (r *Ring[T]) Len() int { return r.n }

// Bytes is the summed cost of the kept items.
func (r *Ring[T]) Bytes() int64 { return r.bytes }

// Slots is how many item slots the storage holds: what a test checks to
// see that storage follows the kept items.
func (r *Ring[T]) Slots() int { return (len(r.blocks) + min(len(r.spare), 1)) * r.perBlock }

// Oldest is the sequence number of the oldest kept item, or Next() when
// none is kept.
func (r *Ring[T]) Oldest() uint64 { return r.next - uint64(r.n) }

// item is the i-th kept item, oldest first.
func (r *Ring[T]) item(i int) *T {
	g := r.head + i
	return &r.blocks[g/r.perBlock][g%r.perBlock]
}

// Push keeps v as item Next(); the caller has already numbered v itself
// when T carries its number.
func (r *Ring[T]) Push(v T) {
	if g := r.head + r.n; g/r.perBlock == len(r.blocks) {
		b := r.spare
		if b == nil {
			b = make([]T, r.perBlock)
		}
		r.spare = nil
		r.blocks = append(r.blocks, b)
	}
	*r.item(r.n) = v
	r.n++
	r.bytes += r.cost(&v)
	r.next++
}

// Skip takes the next number for an item that is not kept, and drops every
// kept item so the kept ones stay consecutive.
func (r *Ring[T]) Skip() {
	r.drop(r.n)
	r.next++
}

// Trim drops the oldest items while the cost is over max and more than
// keep items are kept.
func (r *Ring[T]) Trim(max int64, keep int) {
	n := 0
	for b := r.bytes; b > max && r.n-n > keep; n++ {
		b -= r.cost(r.item(n))
	}
	r.drop(n)
}

// Free drops the oldest items until at least want bytes are freed or none
// is left, and returns the bytes freed.
func (r *Ring[T]) Free(want int64) int64 {
	before := r.bytes
	n := 0
	for freed := int64(0); freed < want && n < r.n; n++ {
		freed += r.cost(r.item(n))
	}
	r.drop(n)
	return before - r.bytes
}

// At is the kept item numbered seq (Oldest() <= seq < Next()).
func (r *Ring[T]) At(seq uint64) *T { return r.item(int(seq - r.Oldest())) }

// Front is the oldest kept item, if any.
func (r *Ring[T]) Front() (*T, bool) {
	if r.n == 0 {
		return nil, false
	}
	return r.item(0), true
}

// DropWhile drops the oldest items while drop says so, and returns the
// bytes freed.
func (r *Ring[T]) DropWhile(drop func(*T) bool) int64 {
	before := r.bytes
	n := 0
	for n < r.n && drop(r.item(n)) {
		n++
	}
	r.drop(n)
	return before - r.bytes
}

// Reset drops every item and releases the storage; numbering goes on.
func (r *Ring[T]) Reset() {
	r.drop(r.n)
	clear(r.blocks)
	r.blocks, r.spare, r.head = nil, nil, 0
}

// AppendFrom appends to buf the kept items numbered from seq on, until buf
// holds max items. seq must be at least Oldest().
func (r *Ring[T]) AppendFrom(buf []T, seq uint64, max int) []T {
	for i := int(seq - r.Oldest()); i < r.n && len(buf) < max; i++ {
		buf = append(buf, *r.item(i))
	}
	return buf
}

// drop drops the n oldest items, zeroing them so their payloads can be
// collected; a block left empty goes (one is kept as the spare).
func (r *Ring[T]) drop(n int) {
	var zero T
	for ; n > 0; n-- {
		old := r.item(0)
		r.bytes -= r.cost(old)
		*old = zero
		r.head++
		r.n--
		if r.head == r.perBlock {
			r.release()
		}
	}
	if r.n == 0 && len(r.blocks) > 0 {
		r.head = 0
		for len(r.blocks) > 0 {
			r.release()
		}
		r.head = 0
	}
}

// release drops the first block, keeping it as the spare if there is none.
func (r *Ring[T]) release() {
	if r.spare == nil {
		r.spare = r.blocks[0]
	}
	r.blocks[0] = nil
	r.blocks = r.blocks[1:]
	r.head = 0
}
