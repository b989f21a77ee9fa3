// Package recent is a set that remembers only the last N keys added. The
// aggregator and the adapters use it for ids that are finished but may still
// be mentioned (a duplicate tool result, a late block of a finished model
// call) without letting their state grow with the length of the stream.
package recent

// Set remembers the last Size keys.
type Set struct {
	ring []string
	next int
	keys map[string]int // key → times present in ring
}

// New returns a set that remembers the last size keys.
func New(size int) *Set {
	return &Set{ring: make([]string, 0, size), keys: make(map[string]int, size)}
}

// Add remembers key, forgetting the oldest key when full.
func (s *Set) Add(key string) {
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, key)
	} else {
		old := s.ring[s.next]
		if s.keys[old]--; s.keys[old] <= 0 {
			delete(s.keys, old)
		}
		s.ring[s.next] = key
		s.next = (s.next + 1) % cap(s.ring)
	}
	s.keys[key]++
}

// Has reports whether key is among the remembered keys.
func (s *Set) Has(key string) bool { return s.keys[key] > 0 }

// Len is the number of distinct keys remembered.
func (s *Set) Len() int { return len(s.keys) }
