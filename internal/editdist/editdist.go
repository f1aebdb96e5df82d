// Package editdist measures how far apart two strings are. It is shared by the
// FEN-similarity reward (engine/rookworld) and the did-you-mean hints of
// unknown keys (luabind).
package editdist

// Levenshtein is the edit distance between a and b counted in bytes: the
// fewest single-byte insertions, deletions and substitutions that turn a into
// b. It uses two rows of len(b)+1 ints.
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
