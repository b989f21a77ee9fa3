//go:build !amd64

package main

type legacyCall struct {
	name string
	call func() error
}

func legacyCalls(path, plain func(string) string, ptr func(string) uintptr, sys func(uintptr, ...uintptr) error) []legacyCall {
	return nil
}
