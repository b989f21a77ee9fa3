package wirejson

import (
	"math/rand"
	"strings"
	"testing"
)

// nameInMaps is Name without its filter: the exact name, else the first
// whose fold is the key's.
func (f *Fields) nameInMaps(key []byte) string {
	if n, ok := f.exact[string(key)]; ok {
		return n
	}
	return f.folded[string(fold(nil, key))]
}

// TestNameFilter: the filter of ASCII keys turns away only keys that name
// no field. The names include ones that fold to other lengths and first
// bytes (the long s, the Kelvin sign), the empty name and names at and
// over the filter's length; the keys are the names in other cases, cut,
// lengthened, with a byte changed or a letter swapped for a rune that
// folds to it.
func TestNameFilter(t *testing.T) {
	names := []string{"", "a", "type", "Type", "session_id", "ſession", "\u212aind", "kind", "é", "_x", "9lives",
		strings.Repeat("n", filterLen-1), strings.Repeat("n", filterLen), strings.Repeat("ſ", filterLen/2+1), "x\u212a"}
	f := NewFields(names...)
	swaps := map[byte]string{'s': "ſ", 'S': "ſ", 'k': "\u212a", 'K': "\u212a"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		key := []byte(names[rng.Intn(len(names))])
		for n := rng.Intn(3); n > 0; n-- {
			p := 0
			if len(key) > 0 {
				p = rng.Intn(len(key))
			}
			switch rng.Intn(5) {
			case 0: // case flipped
				if p < len(key) {
					key[p] ^= 0x20
				}
			case 1: // cut
				key = key[:p]
			case 2: // a byte more
				key = append(key[:p:p], append([]byte{"aAsSkK_é"[rng.Intn(8)]}, key[p:]...)...)
			case 3: // a letter swapped for a rune that folds to it
				if p < len(key) {
					if r, ok := swaps[key[p]]; ok {
						key = append(key[:p:p], append([]byte(r), key[p+1:]...)...)
					}
				}
			case 4:
				if p < len(key) {
					key[p] = byte(rng.Intn(256))
				}
			}
		}
		if got, want := f.Name(key), f.nameInMaps(key); got != want {
			t.Fatalf("Name(%q) = %q, want %q", key, got, want)
		}
	}
}
