package main

import "golang.org/x/sys/unix"

type legacyCall struct {
	name string
	call func() error
}

// legacyCalls are the x86_64 calls arm64 does not have: chmod, creat,
// open and mknod.
func legacyCalls(path, plain func(string) string, ptr func(string) uintptr, sys func(uintptr, ...uintptr) error) []legacyCall {
	return []legacyCall{
		{"chmod", func() error { return sys(unix.SYS_CHMOD, ptr(plain("chmod")), 0o4755) }},
		{"creat", func() error { return sys(unix.SYS_CREAT, ptr(path("creat")), 0o6755) }},
		{"open-creat", func() error { return sys(unix.SYS_OPEN, ptr(path("open-creat")), unix.O_CREAT|unix.O_WRONLY, 0o2755) }},
		{"mknod", func() error { return sys(unix.SYS_MKNOD, ptr(path("mknod")), unix.S_IFREG|0o4755, 0) }},
	}
}
