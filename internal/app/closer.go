package app

import "errors"

// closer closes what was opened, newest first, from one place: New's
// error paths and App.Close both run it, so each resource is closed after
// everything opened later (which may use it) and before what it uses.
type closer struct{ fns []func() error }

// add registers the close of something just opened.
func (c *closer) add(close func() error) { c.fns = append(c.fns, close) }

// close runs every registered close once, newest first, and joins their
// errors.
func (c *closer) close() error {
	var errs []error
	for i := len(c.fns) - 1; i >= 0; i-- {
		errs = append(errs, c.fns[i]())
	}
	c.fns = nil
	return errors.Join(errs...)
}
