package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A repository's index lists its submodules as gitlinks (entries of mode
// 160000), and `git status` enters each that is populated (has a .git) to
// run a status there too: with that .git's config, fsmonitor included. A
// submodule checked out in the workspace has its .git found by the search;
// one that is not (a clone without --recursive leaves an empty directory,
// or none) has nothing to protect, and `git init sub` there would be
// entered by the next `git status` at the top. So the gitlinks are read
// from each protected repository's index, with a parser of agentrun's own:
// git is never run on a repository the agent may have prepared.
//
// The index format is git's Documentation/gitformat-index.txt, versions 2,
// 3 and 4, read as leniently as git reads it (read-cache.c): what git
// would take for a gitlink is taken for one here. A split index (the
// "link" extension: most entries in a shared index) and a sparse index
// (directory entries standing for whole trees, "sdir") list only some of
// them: what is listed is protected, and the caller says the rest may not
// be. So does an index with an offset table (IEOT) whose blocks git may
// read apart from one another, when they do not read as the whole does.

// MaxGitIndexBytes bounds an index read for its gitlinks: about 100 bytes
// an entry, so some two million files.
const MaxGitIndexBytes = 256 << 20

// gitIndex is what an index says of its gitlinks.
type gitIndex struct {
	gitlinks []string // as git names them: relative to the worktree, '/'-separated
	// incomplete is why some gitlinks may be missing ("" when none are).
	incomplete string
}

// errIndex is an index agentrun does not read (nor, mostly, would git).
var errIndex = errors.New("not an index agentrun can read")

// Index entry flags (gitformat-index.txt).
const (
	ceExtended    = 0x4000
	ceNameMask    = 0x0fff
	ceExtFlagMask = 0x6000 // intent-to-add and skip-worktree: all git knows
	modeTypeMask  = 0o170000
	modeGitlink   = 0o160000
	modeDir       = 0o040000 // a sparse index's directory entry
)

// readGitIndex reads the gitlinks of an index of size bytes from r. hashLen
// is the repository's object name length: 20 (SHA-1) or 32 (SHA-256).
func readGitIndex(r io.Reader, size int64, hashLen int) (gitIndex, error) {
	var out gitIndex
	if size > MaxGitIndexBytes {
		return out, fmt.Errorf("%w: larger than %d MiB", errIndex, MaxGitIndexBytes>>20)
	}
	rd := &indexReader{r: bufio.NewReaderSize(io.LimitReader(r, size), 64<<10)}
	var hdr [12]byte
	if err := rd.full(hdr[:]); err != nil {
		return out, err
	}
	if string(hdr[:4]) != "DIRC" {
		return out, fmt.Errorf("%w: no index signature", errIndex)
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	if version < 2 || version > 4 {
		return out, fmt.Errorf("%w: version %d", errIndex, version)
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	fixed := 40 + hashLen + 2 // stat data, object name, flags
	if int64(count) > size/int64(fixed) {
		return out, fmt.Errorf("%w: %d entries cannot fit in %d bytes", errIndex, count, size)
	}
	entry := make([]byte, fixed+2)
	var prev []byte             // the previous name, as git keeps it (version 4)
	offsets := make([]int64, 0) // where each entry starts, for IEOT
	sparse := false
	for i := uint32(0); i < count; i++ {
		offsets = append(offsets, rd.off)
		if err := rd.full(entry[:fixed]); err != nil {
			return out, err
		}
		mode := binary.BigEndian.Uint32(entry[24:28])
		flags := binary.BigEndian.Uint16(entry[fixed-2 : fixed])
		head := fixed
		if flags&ceExtended != 0 {
			if err := rd.full(entry[fixed : fixed+2]); err != nil {
				return out, err
			}
			if binary.BigEndian.Uint16(entry[fixed:fixed+2])&^ceExtFlagMask != 0 {
				return out, fmt.Errorf("%w: unknown entry flags", errIndex)
			}
			head += 2
		}
		n := int(flags & ceNameMask)
		var name []byte
		var err error
		if version == 4 {
			name, err = rd.v4Name(prev, n)
		} else {
			name, err = rd.v2Name(head, n)
		}
		if err != nil {
			return out, err
		}
		prev = name
		switch mode & modeTypeMask {
		case modeGitlink:
			// git names files by the C string: up to a NUL.
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			out.gitlinks = append(out.gitlinks, string(name))
		case modeDir:
			sparse = true
		}
	}
	// The extensions, up to the trailing hash, as git reads them.
	var ieot []byte
	for rd.off+8 <= size-int64(hashLen) {
		var ext [8]byte
		if err := rd.full(ext[:]); err != nil {
			return out, err
		}
		sig, n := string(ext[:4]), int64(binary.BigEndian.Uint32(ext[4:]))
		if n > size-rd.off {
			return out, fmt.Errorf("%w: extension %q runs past the end", errIndex, sig)
		}
		switch sig {
		case "link":
			out.incomplete = "it is a split index (most entries are in a shared index)"
		case "sdir":
			sparse = true
		case "IEOT":
			ieot = make([]byte, n)
			if err := rd.full(ieot); err != nil {
				return out, err
			}
			continue
		default:
			if sig[0] < 'A' || sig[0] > 'Z' {
				// A required extension git would refuse too.
				return out, fmt.Errorf("%w: extension %q", errIndex, sig)
			}
		}
		if err := rd.skip(n); err != nil {
			return out, err
		}
	}
	if sparse && out.incomplete == "" {
		out.incomplete = "it is a sparse index (directories stand for whole trees)"
	}
	if ieot != nil && !ieotAgrees(ieot, offsets) && out.incomplete == "" {
		out.incomplete = "its offset table (IEOT) does not match its entries, which git may then read otherwise"
	}
	return out, nil
}

// ieotAgrees reports whether the blocks of an index entry offset table
// start where the entries do, so that git reading the blocks apart (with
// no previous name at a block's start) reads what a reading from the first
// entry does. (A version 4 block's first entry must then share nothing
// with the one before, which is how git writes it; that is not checked.)
func ieotAgrees(ieot []byte, offsets []int64) bool {
	if len(ieot) < 4 || binary.BigEndian.Uint32(ieot) != 1 || (len(ieot)-4)%8 != 0 {
		return false
	}
	at := 0
	for b := ieot[4:]; len(b) > 0; b = b[8:] {
		off, n := int64(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:]))
		if at >= len(offsets) || offsets[at] != off {
			return false
		}
		at += n
	}
	return at == len(offsets)
}

// indexReader reads an index, counting the offset.
type indexReader struct {
	r   *bufio.Reader
	off int64
}

func (rd *indexReader) full(b []byte) error {
	n, err := io.ReadFull(rd.r, b)
	rd.off += int64(n)
	if err != nil {
		return fmt.Errorf("%w: cut short at byte %d", errIndex, rd.off)
	}
	return nil
}

func (rd *indexReader) skip(n int64) error {
	m, err := rd.r.Discard(int(n))
	rd.off += int64(m)
	if err != nil {
		return fmt.Errorf("%w: cut short at byte %d", errIndex, rd.off)
	}
	return nil
}

// cString reads up to and including a NUL, returning what is before it.
func (rd *indexReader) cString() ([]byte, error) {
	var out []byte
	for {
		chunk, err := rd.r.ReadSlice(0)
		rd.off += int64(len(chunk))
		out = append(out, chunk...)
		if err == nil {
			return out[:len(out)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: a name runs past the end", errIndex)
		}
	}
}

// v2Name reads a version 2 or 3 name of n bytes (its length from the
// flags; ceNameMask: up to a NUL) and the padding to 8 bytes after the
// head bytes before it.
func (rd *indexReader) v2Name(head, n int) ([]byte, error) {
	var name []byte
	used := head
	if n == ceNameMask {
		var err error
		if name, err = rd.cString(); err != nil {
			return nil, err
		}
		n = len(name)
		used += n + 1
	} else {
		name = make([]byte, n)
		if err := rd.full(name); err != nil {
			return nil, err
		}
		used += n
	}
	size := (head + n + 8) &^ 7
	return name, rd.skip(int64(size - used))
}

// v4Name reads a version 4 name: the number of bytes to drop from the end
// of the previous name, then what follows them, NUL-terminated; n is the
// whole name's length from the flags, which git trusts over the NUL.
func (rd *indexReader) v4Name(prev []byte, n int) ([]byte, error) {
	strip, err := rd.varint()
	if err != nil {
		return nil, err
	}
	if strip > uint64(len(prev)) {
		return nil, fmt.Errorf("%w: a name drops more than the previous one holds", errIndex)
	}
	keep := prev[:len(prev)-int(strip)]
	if n == ceNameMask {
		rest, err := rd.cString()
		if err != nil {
			return nil, err
		}
		return append(append([]byte{}, keep...), rest...), nil
	}
	if n < len(keep) {
		return nil, fmt.Errorf("%w: a name shorter than what it keeps", errIndex)
	}
	rest := make([]byte, n-len(keep)+1)
	if err := rd.full(rest); err != nil {
		return nil, err
	}
	return append(append([]byte{}, keep...), rest[:len(rest)-1]...), nil
}

// varint reads git's offset varint (varint.c).
func (rd *indexReader) varint() (uint64, error) {
	c, err := rd.r.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("%w: cut short", errIndex)
	}
	rd.off++
	val := uint64(c & 127)
	for c&128 != 0 {
		val++
		if val == 0 || val>>57 != 0 {
			return 0, fmt.Errorf("%w: a varint overflows", errIndex)
		}
		if c, err = rd.r.ReadByte(); err != nil {
			return 0, fmt.Errorf("%w: cut short", errIndex)
		}
		rd.off++
		val = val<<7 + uint64(c&127)
	}
	return val, nil
}
