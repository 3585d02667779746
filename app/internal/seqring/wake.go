package seqring

// Wake lets a log's readers wait for its next change: a channel made when
// the first reader asks and closed, waking them all at once, on Notify.
// Appending never waits for a reader this way. Guarded by the owner's
// mutex; the zero value is ready.
type Wake struct {
	ch chan struct{} // nil when nobody waits
}

// C is closed on the next Notify. Call it under the owner's mutex, then
// wait on it after unlocking.
func (w *Wake) C() <-chan struct{} {
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// Notify wakes every reader waiting on C.
func (w *Wake) Notify() {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}
