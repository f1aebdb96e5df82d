package grpo

import "testing"

// TestPackSharesPrompts: completions of one prompt side by side are packed as the prompt once
// (but its last token) and a continuation per completion; a lone completion and a one-token
// prompt are packed whole; every completion token is scored, in order.
func TestPackSharesPrompts(t *testing.T) {
	tr, b := setup(t, 21) // prompts of 3, 7, 1 and 5 tokens, group 4
	var part []*completion
	for i := range b.Completions {
		c := &b.Completions[i]
		if i == 12 { // one completion of the last prompt alone: its group is cut after it
			part = append(part, &completion{c: c, prompt: b.Prompts[c.Prompt]})
			break
		}
		part = append(part, &completion{c: c, prompt: b.Prompts[c.Prompt]})
	}
	pb := tr.pack(part)
	tokens, scored := 0, 0
	for _, k := range part {
		scored += len(k.c.Tokens)
	}
	// Prompts 0 and 1 shared (4 completions each), prompt 2 has one token (nothing to share),
	// the completion of prompt 3 is alone.
	tokens = (3 - 1) + 4*(1) + (7 - 1) + 4*(1) + 4*1 + 5 + scored
	if len(pb.Tokens) != tokens || len(pb.Rows) != scored {
		t.Fatalf("%d tokens and %d scored rows, want %d and %d", len(pb.Tokens), len(pb.Rows), tokens, scored)
	}
	var want []int32
	for _, k := range part {
		want = append(want, k.c.Tokens...)
	}
	for i, tg := range pb.Targets {
		if tg != want[i] {
			t.Fatalf("scored row %d targets %d, want %d", i, tg, want[i])
		}
	}
	if pb.Prefix == nil || pb.Prefix[1] != 0 || pb.Prefix[4] != 0 || pb.Prefix[5] != -1 || pb.Prefix[6] != 5 {
		t.Fatalf("prefixes %v", pb.Prefix)
	}
	if err := pb.Validate(tinyConfig); err != nil {
		t.Fatal(err)
	}
}
