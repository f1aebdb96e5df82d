package editdist

import "testing"

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"flaw", "lawn", 2},
		{"intention", "execution", 5},
		{"temprature", "temperature", 1},
		{"klcoef", "kl_coef", 1},
		{"abc", "abc", 0},
		{"ab", "ba", 2},                  // no transpositions: two substitutions
		{"é", "e", 2},                    // bytes, not runes: 0xc3 0xa9 vs 'e'
		{"8/8/8/8/8/8/8/8", "8/8/8", 10}, // five ranks' "/8" missing
	}
	for _, tc := range tests {
		if got := Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Levenshtein(tc.b, tc.a); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}
