package tokenizer

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
)

// EOT is the id of <|endoftext|>, GPT-2's only special token. rookscript uses it
// as the document separator in packed training batches and as the stop token
// when sampling.
const EOT int32 = 50256

// EOTText is the text that Decode produces for EOT. Encode never maps this
// string back to EOT: special tokens are added explicitly (EncodeDoc), never
// parsed out of text.
const EOTText = "<|endoftext|>"

const (
	numRanks  = 50256        // mergeable byte-pair tokens, ids 0..50255
	vocabSize = numRanks + 1 // plus EOT
	replChar  = "\uFFFD"     // what Decode writes for an id outside the vocabulary
	encName   = "r50k_base"  // tiktoken's name for the GPT-2 encoding
	pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	errPrefix = "tokenizer: " // prefix of every error this package returns
)

// r50kBase is the GPT-2 rank file in tiktoken format: one "base64(token) rank"
// line per mergeable token.
//
//go:embed r50k_base.tiktoken
var r50kBase []byte

// Tokenizer is the GPT-2 byte-pair encoder. It is immutable after construction
// and safe for concurrent use by multiple goroutines.
type Tokenizer struct {
	enc    *tiktoken.Tiktoken
	tokens [vocabSize][]byte // id -> the raw bytes it stands for; tokens[EOT] = EOTText
}

var (
	gpt2Once sync.Once
	gpt2Tok  *Tokenizer
	gpt2Err  error
)

// GPT2 returns the shared GPT-2 tokenizer, building it from the embedded
// vocabulary on first use. Later calls return the same value (or the same
// error). It never reads files or touches the network.
func GPT2() (*Tokenizer, error) {
	gpt2Once.Do(func() {
		gpt2Tok, gpt2Err = newTokenizer(r50kBase)
	})
	return gpt2Tok, gpt2Err
}

// newTokenizer builds a Tokenizer from a rank file in tiktoken format.
func newTokenizer(vocab []byte) (*Tokenizer, error) {
	ranks, err := parseRanks(vocab)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{}
	for tok, id := range ranks {
		t.tokens[id] = []byte(tok)
	}
	t.tokens[EOT] = []byte(EOTText)

	special := map[string]int{EOTText: int(EOT)}
	bpe, err := tiktoken.NewCoreBPE(ranks, special, pattern)
	if err != nil {
		return nil, fmt.Errorf(errPrefix+"%w", err)
	}
	encoding := &tiktoken.Encoding{
		Name:           encName,
		PatStr:         pattern,
		MergeableRanks: ranks,
		SpecialTokens:  special,
		ExplicitNVocab: vocabSize,
	}
	t.enc = tiktoken.NewTiktoken(bpe, encoding, map[string]any{EOTText: true})
	return t, nil
}

// parseRanks reads a tiktoken rank file and checks that it is exactly the
// shape GPT-2 needs: ranks 0..numRanks-1, each once, distinct non-empty tokens,
// and every single byte present (so any UTF-8 text can be encoded).
func parseRanks(data []byte) (map[string]int, error) {
	ranks := make(map[string]int, numRanks)
	seen := make([]bool, numRanks)
	lineNo := 0
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		lineNo++
		if len(line) == 0 {
			continue
		}
		b64, num, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return nil, &VocabError{Line: lineNo, Problem: `want "<base64> <rank>"`}
		}
		tok, err := base64.StdEncoding.DecodeString(string(b64))
		if err != nil || len(tok) == 0 {
			return nil, &VocabError{Line: lineNo, Problem: "bad token", Value: string(b64)}
		}
		rank, err := strconv.Atoi(string(num))
		if err != nil || rank < 0 || rank >= numRanks {
			return nil, &VocabError{Line: lineNo, Problem: "bad rank", Value: string(num)}
		}
		if seen[rank] {
			return nil, &VocabError{Line: lineNo, Problem: "duplicate rank", Value: strconv.Itoa(rank)}
		}
		if _, dup := ranks[string(tok)]; dup {
			return nil, &VocabError{Line: lineNo, Problem: "duplicate token", Value: string(tok)}
		}
		seen[rank] = true
		ranks[string(tok)] = rank
	}
	if len(ranks) != numRanks {
		return nil, &VocabError{Problem: fmt.Sprintf("has %d tokens, want %d", len(ranks), numRanks), Value: strconv.Itoa(len(ranks))}
	}
	for b := 0; b < 256; b++ {
		if _, ok := ranks[string([]byte{byte(b)})]; !ok {
			return nil, &VocabError{Problem: fmt.Sprintf("lacks the single byte 0x%02x", b), Value: string([]byte{byte(b)})}
		}
	}
	return ranks, nil
}

// Encode returns the GPT-2 token ids of s. It never emits EOT: the text
// "<|endoftext|>" inside s is encoded as ordinary characters. s is read as
// UTF-8; each byte of an invalid sequence is encoded as U+FFFD, as a Go range
// loop would see it. The result is never nil.
func (t *Tokenizer) Encode(s string) []int32 {
	if s == "" {
		return []int32{}
	}
	ids := t.enc.EncodeOrdinary(s)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// EncodeDoc returns Encode(s) followed by EOT: one training document.
func (t *Tokenizer) EncodeDoc(s string) []int32 {
	return append(t.Encode(s), EOT)
}

// Split tokenizes prompt+completion as one text, as a model trained on whole documents read
// it, and finds the prompt's end in those tokens. When ok, ids[:n] is Encode(prompt): the
// prompt alone is a token prefix of the joint text, so a model given it continues at a
// boundary it was trained on. When the prompt ends inside a token of the joint text (GPT-2
// joins a trailing space to the next word, " M"), ok is false and ids[:n] is the longest
// prefix whose text, a prefix of the prompt, is itself token-consistent. Text that is not
// valid UTF-8 is read as Encode reads it.
func (t *Tokenizer) Split(prompt, completion string) (ids []int32, n int, ok bool) {
	if !utf8.ValidString(prompt) {
		prompt = string([]rune(prompt))
	}
	if !utf8.ValidString(completion) {
		completion = string([]rune(completion))
	}
	ids = t.Encode(prompt + completion)
	text := prompt + completion
	n, off := 0, 0 // off: the byte length of ids[:n]'s text
	for n < len(ids) && off+len(t.tokens[ids[n]]) <= len(prompt) {
		off += len(t.tokens[ids[n]])
		n++
	}
	for ; n > 0; n-- {
		if slices.Equal(t.Encode(text[:off]), ids[:n]) {
			return ids, n, off == len(prompt)
		}
		off -= len(t.tokens[ids[n-1]])
	}
	return ids, 0, prompt == ""
}

// Decode returns the text of ids, EOT included as "<|endoftext|>". It never
// panics: an id outside [0, VocabSize()) is written as U+FFFD; use DecodeErr to
// reject such ids instead. The bytes are concatenated as they are, so a slice
// that ends in the middle of a multi-byte UTF-8 character yields a string that
// is not valid UTF-8; a sampler decoding token by token should collect
// TokenBytes and convert only complete characters.
func (t *Tokenizer) Decode(ids []int32) string {
	n := 0
	for _, id := range ids {
		if t.valid(id) {
			n += len(t.tokens[id])
		} else {
			n += len(replChar)
		}
	}
	buf := make([]byte, 0, n)
	for _, id := range ids {
		if t.valid(id) {
			buf = append(buf, t.tokens[id]...)
		} else {
			buf = append(buf, replChar...)
		}
	}
	return string(buf)
}

// DecodeErr is Decode that fails on the first id outside [0, VocabSize()),
// naming the id and its position, instead of writing U+FFFD.
func (t *Tokenizer) DecodeErr(ids []int32) (string, error) {
	for i, id := range ids {
		if !t.valid(id) {
			return "", &IDError{ID: id, Pos: i}
		}
	}
	return t.Decode(ids), nil
}

// TokenBytes returns a copy of the raw bytes of token id (for EOT, the bytes
// of "<|endoftext|>"), or nil if id is outside the vocabulary. A token may hold
// only part of a multi-byte UTF-8 character; callers that stream text append
// these bytes to a buffer and emit the complete characters (see utf8.FullRune).
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return bytes.Clone(t.tokens[id])
}

// VocabSize is the number of token ids, 50257; ids are 0..VocabSize()-1 and
// the last one is EOT.
func (t *Tokenizer) VocabSize() int { return vocabSize }

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < vocabSize }

// VocabError is a rank file that is not the GPT-2 vocabulary: the line at fault and what is
// wrong with it.
type VocabError struct {
	Line    int    // 1-based line of the rank file; 0 when the file as a whole is wrong
	Problem string // `want "<base64> <rank>"`, "bad token", "bad rank", "duplicate rank", "duplicate token"; for the whole file, what it has or lacks
	Value   string // the token or rank as written; for the whole file, its token count or the missing byte
}

func (e *VocabError) Error() string {
	if e.Line == 0 {
		return errPrefix + "vocabulary " + e.Problem
	}
	s := fmt.Sprintf(errPrefix+"vocabulary line %d: %s", e.Line, e.Problem)
	if e.Value != "" {
		s += fmt.Sprintf(" %q", e.Value)
	}
	return s
}

// IDError is the error DecodeErr returns for a token id outside the
// vocabulary; callers can match it with errors.As.
type IDError struct {
	ID  int32 // the offending id
	Pos int   // its index in the slice passed to DecodeErr
}

func (e *IDError) Error() string {
	return fmt.Sprintf(errPrefix+"token id %d at position %d is outside the vocabulary [0, %d)", e.ID, e.Pos, vocabSize)
}
