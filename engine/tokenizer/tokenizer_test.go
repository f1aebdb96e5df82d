package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// r50kSHA256 is the published SHA-256 of OpenAI's r50k_base.tiktoken.
const r50kSHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"

const (
	startFEN = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
	e4FEN    = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1"
)

var (
	spaces26 = strings.Repeat(" ", 26)

	// rookWorldPolicy is one RookWorld policy-task training string: position,
	// candidate moves, their evaluations and the best move, padded with spaces.
	rookWorldPolicy = "P: " + e4FEN + spaces26 +
		"M: e7e5 c7c5 e7e6 c7c6 g8f6      " +
		"E: 0.31 0.35 0.28 0.30 0.25         B: c7c5"
)

// goldenCases must match CASES in testdata/gen_golden.py name for name and
// text for text; the expected ids live in testdata/golden.json, written by that
// independent reference encoder.
var goldenCases = []struct{ name, text string }{
	{"empty", ""},
	{"hello_world", "Hello world"},
	{"fen_after_e4", e4FEN},
	{"fen_start", startFEN},
	{"fen_endgame", "8/8/4k3/8/2K5/8/6P1/8 w - - 12 57"},
	{"rookworld_policy_prompt", "P: " + startFEN + spaces26 + "M: e2e4 d2d4"},
	{"rookworld_policy_full", rookWorldPolicy},
	{"rookworld_env", "A: " + startFEN + "+e2e4+e2e4+" + e4FEN + "+0.001+0+0"},
	{"uci_promotion", "e7e8q"},
	{"uci_moves", "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 e1g1 a2a1n"},
	{"pgn", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 1-0"},
	{"contractions", "it's I'll we've they're I'm he'd don't IT'S"},
	{"numbers", "3.14159 1234567890 -42 1e-5"},
	{"cjk", "国际象棋 将军！ チェス"},
	{"emoji", "♚♛ 🎉🤔 👨\u200d👩\u200d👧 ♗"},
	{"combining_marks", "e\u0301cole\u0300 n\u0303 a\u0308\u0304 \u0915\u094d\u0937"},
	{"accented", "café naïve Straße Ångström"},
	{"spaces_run", "a" + spaces26 + "b"},
	{"spaces_only", "       "},
	{"trailing_spaces", "end   "},
	{"leading_spaces", "   start"},
	{"newlines", "line1\n\nline2\n\n\n"},
	{"crlf", "a\r\nb\r\n"},
	{"tabs", "\tx\t\ty\t"},
	{"mixed_whitespace", " \n \t \n\n  x  \t\n"},
	{"unicode_whitespace", "a\u00a0b\u3000c\u2003d\v\fe\u0085f"},
	{"control_chars", "a\x00b\x1cc\x1fd\x7f"},
	{"endoftext_literal", "<|endoftext|>"},
	{"endoftext_inline", "a<|endoftext|>b <|endoftext|>"},
	{"punctuation", "!!! ??? ... --- ((x)) [y] {z} @#$%^&*"},
	{"apostrophe_forms", "'s 's' ''s 're've"},
}

type goldenFile struct {
	Encoding    string `json:"encoding"`
	VocabSHA256 string `json:"vocab_sha256"`
	Cases       []struct {
		Name string  `json:"name"`
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	} `json:"cases"`
}

func loadGolden(t *testing.T) map[string]struct {
	text string
	ids  []int32
} {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if g.Encoding != encName || g.VocabSHA256 != r50kSHA256 {
		t.Fatalf("golden.json was made for %s / %s, want %s / %s", g.Encoding, g.VocabSHA256, encName, r50kSHA256)
	}
	m := make(map[string]struct {
		text string
		ids  []int32
	}, len(g.Cases))
	for _, c := range g.Cases {
		if _, dup := m[c.Name]; dup {
			t.Fatalf("golden.json: duplicate case %q", c.Name)
		}
		m[c.Name] = struct {
			text string
			ids  []int32
		}{c.Text, c.IDs}
	}
	return m
}

func mustGPT2(tb testing.TB) *Tokenizer {
	tb.Helper()
	tok, err := GPT2()
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func TestEmbeddedVocabulary(t *testing.T) {
	sum := sha256.Sum256(r50kBase)
	if got := hex.EncodeToString(sum[:]); got != r50kSHA256 {
		t.Fatalf("embedded r50k_base.tiktoken has SHA-256 %s, want %s", got, r50kSHA256)
	}
	tok := mustGPT2(t)
	if got := tok.VocabSize(); got != 50257 {
		t.Fatalf("VocabSize() = %d, want 50257", got)
	}
	if int(EOT) != tok.VocabSize()-1 {
		t.Fatalf("EOT = %d, want the last id %d", EOT, tok.VocabSize()-1)
	}
}

// TestHelloWorld pins the well-known GPT-2 ids independently of golden.json.
func TestHelloWorld(t *testing.T) {
	tok := mustGPT2(t)
	if got, want := tok.Encode("Hello world"), []int32{15496, 995}; !slices.Equal(got, want) {
		t.Fatalf("Encode(%q) = %v, want %v", "Hello world", got, want)
	}
}

func TestEncodeGolden(t *testing.T) {
	tok := mustGPT2(t)
	golden := loadGolden(t)
	if len(golden) != len(goldenCases) {
		t.Errorf("golden.json has %d cases, the table %d: regenerate with testdata/gen_golden.py", len(golden), len(goldenCases))
	}
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := golden[tc.name]
			if !ok {
				t.Fatalf("case %q missing from golden.json", tc.name)
			}
			if g.text != tc.text {
				t.Fatalf("golden.json text %q differs from the table's %q", g.text, tc.text)
			}
			got := tok.Encode(tc.text)
			if got == nil {
				t.Fatal("Encode returned nil")
			}
			if !slices.Equal(got, g.ids) {
				t.Fatalf("Encode(%q)\n got %v\nwant %v", tc.text, got, g.ids)
			}
			if slices.Contains(got, EOT) {
				t.Fatalf("Encode(%q) emitted EOT", tc.text)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	tok := mustGPT2(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			ids := tok.Encode(tc.text)
			if got := tok.Decode(ids); got != tc.text {
				t.Fatalf("Decode(Encode(%q)) = %q", tc.text, got)
			}
			got, err := tok.DecodeErr(ids)
			if err != nil || got != tc.text {
				t.Fatalf("DecodeErr(Encode(%q)) = %q, %v", tc.text, got, err)
			}
			var cat []byte
			for _, id := range ids {
				cat = append(cat, tok.TokenBytes(id)...)
			}
			if string(cat) != tc.text {
				t.Fatalf("concatenated TokenBytes = %q, want %q", cat, tc.text)
			}
		})
	}
}

func TestEndOfText(t *testing.T) {
	tok := mustGPT2(t)
	tests := []struct {
		name string
		ids  []int32
		want string
	}{
		{"eot alone", []int32{EOT}, "<|endoftext|>"},
		{"doc then eot", tok.EncodeDoc("e2e4"), "e2e4<|endoftext|>"},
		{"empty doc", tok.EncodeDoc(""), "<|endoftext|>"},
		{"two docs", append(tok.EncodeDoc("a"), tok.EncodeDoc("b")...), "a<|endoftext|>b<|endoftext|>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.Decode(tc.ids); got != tc.want {
				t.Fatalf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}

	doc := tok.EncodeDoc(rookWorldPolicy)
	if want := append(tok.Encode(rookWorldPolicy), EOT); !slices.Equal(doc, want) {
		t.Fatalf("EncodeDoc = %v, want Encode followed by EOT %v", doc, want)
	}
	// The literal text is ordinary characters, and decoding EOT gives that
	// text back, so Encode(Decode([EOT])) is not [EOT] by design.
	if ids := tok.Encode(EOTText); len(ids) == 1 || slices.Contains(ids, EOT) {
		t.Fatalf("Encode(%q) = %v: must not produce EOT", EOTText, ids)
	}
}

func TestDecodeOutOfRange(t *testing.T) {
	tok := mustGPT2(t)
	tests := []struct {
		name    string
		ids     []int32
		want    string
		badID   int32
		badPos  int
		wantErr bool
	}{
		{"valid", []int32{15496, 995}, "Hello world", 0, 0, false},
		{"last valid", []int32{EOT}, "<|endoftext|>", 0, 0, false},
		{"empty", nil, "", 0, 0, false},
		{"negative", []int32{15496, -1, 995}, "Hello\uFFFD world", -1, 1, true},
		{"vocab size", []int32{50257}, "\uFFFD", 50257, 0, true},
		{"max int32", []int32{995, math.MaxInt32}, " world\uFFFD", math.MaxInt32, 1, true},
		{"min int32", []int32{math.MinInt32, 50300}, "\uFFFD\uFFFD", math.MinInt32, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.Decode(tc.ids); got != tc.want {
				t.Fatalf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
			got, err := tok.DecodeErr(tc.ids)
			if !tc.wantErr {
				if err != nil || got != tc.want {
					t.Fatalf("DecodeErr(%v) = %q, %v; want %q, nil", tc.ids, got, err, tc.want)
				}
				return
			}
			var idErr *IDError
			if !errors.As(err, &idErr) {
				t.Fatalf("DecodeErr(%v) error = %v, want *IDError", tc.ids, err)
			}
			if idErr.ID != tc.badID || idErr.Pos != tc.badPos {
				t.Fatalf("IDError = {ID: %d, Pos: %d}, want {ID: %d, Pos: %d}", idErr.ID, idErr.Pos, tc.badID, tc.badPos)
			}
			if got != "" {
				t.Fatalf("DecodeErr(%v) = %q with its error", tc.ids, got)
			}
			if tok.TokenBytes(tc.badID) != nil {
				t.Fatalf("TokenBytes(%d) != nil", tc.badID)
			}
		})
	}
}

// TestSplitUTF8 checks that tokens holding part of a multi-byte character keep
// their raw bytes, and that a caller can stream text token by token.
func TestSplitUTF8(t *testing.T) {
	tok := mustGPT2(t)
	for _, text := range []string{"🎉🤔", "国际象棋 将军！", "👨\u200d👩\u200d👧", "e\u0301cole\u0300"} {
		t.Run(text, func(t *testing.T) {
			ids := tok.Encode(text)
			split := 0
			var pending []byte
			var streamed strings.Builder
			for _, id := range ids {
				b := tok.TokenBytes(id)
				if !utf8.Valid(b) {
					split++
					// Decode of a lone partial token must give the raw bytes,
					// not a replacement character.
					if got := tok.Decode([]int32{id}); got != string(b) {
						t.Fatalf("Decode([%d]) = %q, want raw bytes %q", id, got, b)
					}
				}
				pending = append(pending, b...)
				for len(pending) > 0 && utf8.FullRune(pending) {
					r, n := utf8.DecodeRune(pending)
					streamed.WriteRune(r)
					pending = pending[n:]
				}
			}
			if split == 0 {
				t.Fatalf("no token of %q splits a UTF-8 character (ids %v); the test needs one", text, ids)
			}
			if len(pending) != 0 || streamed.String() != text {
				t.Fatalf("streamed %q (pending %q), want %q", streamed.String(), pending, text)
			}
		})
	}
}

// TestTiktokenDecodeRawBytes checks, for every id, that tiktoken-go's own
// decoder returns exactly the raw bytes of the rank file, including the tokens
// that are not valid UTF-8 on their own.
func TestTiktokenDecodeRawBytes(t *testing.T) {
	tok := mustGPT2(t)
	invalid := 0
	for id := 0; id < tok.VocabSize(); id++ {
		want := tok.TokenBytes(int32(id))
		if len(want) == 0 {
			t.Fatalf("token %d has no bytes", id)
		}
		if !utf8.Valid(want) {
			invalid++
		}
		if got := tok.enc.Decode([]int{id}); got != string(want) {
			t.Fatalf("tiktoken Decode([%d]) = %q, want %q", id, got, want)
		}
	}
	if invalid == 0 {
		t.Fatal("expected byte-level tokens that are not valid UTF-8 on their own")
	}
	ids := tok.Encode("🎉 国际象棋")
	wide := make([]int, len(ids))
	for i, id := range ids {
		wide[i] = int(id)
	}
	if got := tok.enc.Decode(wide); got != "🎉 国际象棋" {
		t.Fatalf("tiktoken Decode = %q", got)
	}
}

func TestTokenBytesIsACopy(t *testing.T) {
	tok := mustGPT2(t)
	b := tok.TokenBytes(995)
	if string(b) != " world" {
		t.Fatalf("TokenBytes(995) = %q, want %q", b, " world")
	}
	b[0] = 'X'
	if got := tok.TokenBytes(995); string(got) != " world" {
		t.Fatalf("TokenBytes(995) after mutating a previous result = %q", got)
	}
	if got := tok.TokenBytes(EOT); string(got) != EOTText {
		t.Fatalf("TokenBytes(EOT) = %q", got)
	}
}

// TestInvalidUTF8 documents how Encode treats bytes that are not UTF-8.
func TestInvalidUTF8(t *testing.T) {
	tok := mustGPT2(t)
	tests := []struct{ in, want string }{
		{"\xff", "\uFFFD"},
		{"a\xe2\x99b", "a\uFFFD\uFFFDb"},
		{"\xf0\x9f\x8e", "\uFFFD\uFFFD\uFFFD"},
	}
	for _, tc := range tests {
		if got := tok.Decode(tok.Encode(tc.in)); got != tc.want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	first := mustGPT2(t)
	want := make([][]int32, len(goldenCases))
	for i, tc := range goldenCases {
		want[i] = first.Encode(tc.text)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := GPT2()
			if err != nil || tok != first {
				errs <- "GPT2() returned a different tokenizer or an error"
				return
			}
			for rep := 0; rep < 5; rep++ {
				for i, tc := range goldenCases {
					ids := tok.Encode(tc.text)
					if !slices.Equal(ids, want[i]) || tok.Decode(ids) != tc.text {
						errs <- "concurrent Encode/Decode mismatch on " + tc.name
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestParseRanksRejects(t *testing.T) {
	// The first three lines of the real file, for building bad variants.
	head := "IQ== 0\nIg== 1\nIw== 2\n"
	tests := []struct {
		name, data string
		want       VocabError // Problem is checked for line errors only
	}{
		{"truncated", head, VocabError{Value: "3"}},
		{"no rank", "IQ==\n", VocabError{Line: 1, Problem: `want "<base64> <rank>"`}},
		{"bad base64", "!!!! 0\n", VocabError{Line: 1, Problem: "bad token", Value: "!!!!"}},
		{"empty token", " 0\n", VocabError{Line: 1, Problem: "bad token"}},
		{"bad rank", "IQ== x\n", VocabError{Line: 1, Problem: "bad rank", Value: "x"}},
		{"rank too big", "IQ== 50256\n", VocabError{Line: 1, Problem: "bad rank", Value: "50256"}},
		{"negative rank", "IQ== -1\n", VocabError{Line: 1, Problem: "bad rank", Value: "-1"}},
		{"duplicate rank", head + "JA== 2\n", VocabError{Line: 4, Problem: "duplicate rank", Value: "2"}},
		{"duplicate token", head + "IQ== 3\n", VocabError{Line: 4, Problem: "duplicate token", Value: "!"}},
		// A full-size file with one single byte missing must be refused too.
		{"missing single byte", string(bytes.Replace(r50kBase, []byte("IQ== 0\n"), []byte("IQE= 0\n"), 1)), VocabError{Value: "!"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTokenizer([]byte(tc.data))
			var ve *VocabError
			if !errors.As(err, &ve) || ve.Line != tc.want.Line || ve.Value != tc.want.Value || (tc.want.Line > 0 && ve.Problem != tc.want.Problem) {
				t.Fatalf("error = %v (%+v), want a *VocabError %+v", err, ve, tc.want)
			}
		})
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, tc := range goldenCases {
		f.Add(tc.text)
	}
	for _, s := range []string{"\xff\xfe", "a\xe2\x99b", "\xf0\x9f\x8e", "\x00", "'S'LL", "\u2028\u2029", strings.Repeat(" \n", 40)} {
		f.Add(s)
	}
	tok := mustGPT2(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= EOT {
				t.Fatalf("Encode(%q) produced id %d outside [0, %d)", s, id, EOT)
			}
		}
		// Valid UTF-8 round-trips exactly; otherwise each invalid byte
		// comes back as U+FFFD, which for valid s is the identity.
		want := string([]rune(s))
		if utf8.ValidString(s) && want != s {
			t.Fatalf("rune conversion changed valid UTF-8 %q", s)
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if got, err := tok.DecodeErr(tok.EncodeDoc(s)); err != nil || got != want+EOTText {
			t.Fatalf("DecodeErr(EncodeDoc(%q)) = %q, %v", s, got, err)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tok := mustGPT2(b)
	b.SetBytes(int64(len(rookWorldPolicy)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(tok.Encode(rookWorldPolicy))
	}
	b.ReportMetric(float64(n), "tokens/op")
}

// TestSplit: where a prompt ends in the tokens of its joined text. A trailing space joins the
// next word (" M"), so the prompt carrying it is not a token prefix and its consistent prefix
// loses it; a prompt ending inside a word has the word's start cut off; a boundary between
// pre-tokens is consistent.
func TestSplit(t *testing.T) {
	tok := mustGPT2(t)
	tests := []struct {
		name, prompt, completion string
		ok                       bool
		consistent               string
	}{
		{"padded minus one space", "P: " + startFEN + "   ", " M: e2e4", true, "P: " + startFEN + "   "},
		{"fully padded", "P: " + startFEN + "    ", "M: e2e4", false, "P: " + startFEN + "   "},
		{"one pad space", "P: " + startFEN + " ", "M: e2e4", false, "P: " + startFEN},
		{"bare FEN", "P: " + startFEN, "    M: e2e4", true, "P: " + startFEN},
		{"digit then letter", "P: " + startFEN, "M: e2e4", true, "P: " + startFEN},
		{"after a plus", "A: " + startFEN + "+e2e4+e2e4+", e4FEN + "+0.001+0+0", true, "A: " + startFEN + "+e2e4+e2e4+"},
		{"inside a word", "Hel", "lo world", false, ""},
		{"between words", "Hello", " world", true, "Hello"},
		{"empty prompt", "", "Hello", true, ""},
		{"empty completion", "Hello ", "", true, "Hello "},
		{"space before newline", "a ", "\nb", true, "a "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids, n, ok := tok.Split(tc.prompt, tc.completion)
			if !slices.Equal(ids, tok.Encode(tc.prompt+tc.completion)) {
				t.Fatalf("ids are not the joined text's tokens")
			}
			if ok != tc.ok || tok.Decode(ids[:n]) != tc.consistent {
				t.Errorf("Split = ok %v, prefix %q; want %v, %q", ok, tok.Decode(ids[:n]), tc.ok, tc.consistent)
			}
			if !slices.Equal(ids[:n], tok.Encode(tok.Decode(ids[:n]))) {
				t.Errorf("the prefix %v is not its own text's tokens", ids[:n])
			}
		})
	}
}
