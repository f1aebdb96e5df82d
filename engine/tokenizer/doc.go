// Package tokenizer is GPT-2's byte-pair encoding (tiktoken's "r50k_base"),
// the tokenizer of every rookscript model. It works offline: the vocabulary is
// embedded in the binary and nothing is read from disk or the network.
//
// # Use
//
//	tok, err := tokenizer.GPT2() // built once, shared, safe for concurrent use
//	ids := tok.EncodeDoc("P: " + fen + "  ...  B: e2e4") // text ids, then EOT
//	text := tok.Decode(ids)
//
// There are 50257 ids: 0..50255 are byte-pair tokens and 50256 is EOT,
// "<|endoftext|>", the document separator in packed batches and the stop token
// when sampling.
//
// # Encoding
//
// Text is split by GPT-2's pre-tokenizer pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// and each piece is byte-pair merged by rank (github.com/pkoukk/tiktoken-go).
// Special tokens are never parsed from text: Encode maps the characters
// "<|endoftext|>" to ordinary tokens, and the only way to get EOT is to add it,
// as EncodeDoc does. Input is read as UTF-8; each byte of an invalid sequence
// is encoded as U+FFFD, so Decode(Encode(s)) == s exactly when s is valid UTF-8.
//
// Encode(a+b) need not be Encode(a) followed by Encode(b): a trailing space of
// a joins the first word of b (" M"). Split tokenizes prompt+completion as one
// text, as a model trained on whole documents read it, and says whether the
// prompt alone is a token prefix of it, and if not, which prefix of the prompt
// is.
//
// # Decoding
//
// Decode concatenates the raw bytes of the tokens and never panics: an id
// outside [0, 50257) becomes U+FFFD. DecodeErr instead returns an *IDError
// naming the first such id and its position.
//
// A token may carry only part of a multi-byte UTF-8 character (emoji and most
// CJK text are split across tokens), so decoding a single token can give a
// string that is not valid UTF-8. A sampler that prints as it goes should
// append TokenBytes(id) to a buffer and emit only complete characters, for
// example with utf8.FullRune.
//
// # Vocabulary and tests
//
// r50k_base.tiktoken is OpenAI's GPT-2 rank file in tiktoken format (SHA-256
// 306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930), as
// distributed with github.com/pkoukk/tiktoken-go-loader under the MIT license
// in r50k_base.tiktoken.LICENSE.
//
// The expected ids in testdata/golden.json come from testdata/gen_golden.py, a
// separate Python reference encoder (python3 with the regex module) that reads
// the same rank file; rerun it from this directory after changing the test
// table:
//
//	python3 testdata/gen_golden.py
package tokenizer
