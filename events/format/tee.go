package format

import (
	"errors"

	"github.com/agentrun-dev/agentrun/events"
)

// Tee renders the same stream with several renderers, in order: stdout in
// the chosen format and the events file, say. A renderer that fails (a
// closed pipe on stdout, a full disk) is dropped and the others go on, so
// the events file keeps the whole stream when a pipe's reader died; Err
// says what failed.
type Tee struct {
	renderers []Renderer
	failed    []error // by renderer; nil while it works
}

// NewTee is a Tee of rs.
func NewTee(rs ...Renderer) *Tee { return &Tee{renderers: rs, failed: make([]error, len(rs))} }

// each calls f on every working renderer; it fails only when none works.
func (t *Tee) each(f func(Renderer) error) error {
	working := 0
	for i, r := range t.renderers {
		if t.failed[i] != nil {
			continue
		}
		if err := f(r); err != nil {
			t.failed[i] = err
			continue
		}
		working++
	}
	if working == 0 && len(t.renderers) > 0 {
		return t.Err()
	}
	return nil
}

// Note passes the note to every renderer.
func (t *Tee) Note(text string) error { return t.each(func(r Renderer) error { return r.Note(text) }) }

// Event passes e to every renderer.
func (t *Tee) Event(e events.Event) error {
	return t.each(func(r Renderer) error { return r.Event(e) })
}

// Partial passes p to every working renderer that shows partial text
// (Live); the others never see it.
func (t *Tee) Partial(p events.Partial) error {
	return t.each(func(r Renderer) error {
		if l, ok := r.(Live); ok {
			return l.Partial(p)
		}
		return nil
	})
}

// Err is the first error of each renderer that failed, joined; nil when
// all work.
func (t *Tee) Err() error { return errors.Join(t.failed...) }

// Failed reports whether renderer i (in NewTee's order) failed.
func (t *Tee) Failed(i int) error { return t.failed[i] }

// Close closes every renderer.
func (t *Tee) Close() error {
	var errs []error
	for _, r := range t.renderers {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
