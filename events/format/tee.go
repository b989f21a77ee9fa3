package format

import (
	"errors"

	"github.com/agentrun-dev/agentrun/events"
)

// Tee renders the same stream with several renderers, in order: stdout in
// the chosen format and the events file of a Pod, say.
type Tee []Renderer

// Note passes the note to every renderer.
func (t Tee) Note(text string) error {
	var errs []error
	for _, r := range t {
		errs = append(errs, r.Note(text))
	}
	return errors.Join(errs...)
}

// Event passes e to every renderer; a failing one does not stop the others.
func (t Tee) Event(e events.Event) error {
	var errs []error
	for _, r := range t {
		errs = append(errs, r.Event(e))
	}
	return errors.Join(errs...)
}

// Close closes every renderer.
func (t Tee) Close() error {
	var errs []error
	for _, r := range t {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
