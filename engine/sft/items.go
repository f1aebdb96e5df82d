package sft

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/tokenizer"
)

// Item is a training item given as a prompt and the target that follows it.
type Item struct {
	Prompt, Target string
}

// BoundaryError refuses an item whose prompt ends inside a token of its joined text: the
// model would learn a split that no rollout of that prompt ever meets.
type BoundaryError struct {
	Item       int    // the item's number, 1 for the first
	Prompt     string // its prompt
	Consistent string // the longest prefix of the prompt that ends at a token boundary
}

func (e *BoundaryError) Error() string {
	return fmt.Sprintf("sft: item %d: prompt %q ends inside a token of prompt..target; the token-consistent prompt is %q (move the rest into the target)",
		e.Item, e.Prompt, e.Consistent)
}

// Docs tokenizes each item as one text, prompt..target followed by <|endoftext|>, as a model
// trained on whole documents reads it, and splits it where the prompt ends; with
// completionOnly only the target's tokens are learned. An item whose prompt does not end at a
// token boundary of its text is a *BoundaryError naming it.
func Docs(tok *tokenizer.Tokenizer, items []Item, completionOnly bool) ([]Doc, error) {
	docs := make([]Doc, len(items))
	for i, it := range items {
		ids, n, ok := tok.Split(it.Prompt, it.Target)
		if !ok {
			return nil, &BoundaryError{Item: i + 1, Prompt: it.Prompt, Consistent: tok.Decode(ids[:n])}
		}
		docs[i] = Doc{Tokens: append(ids, tokenizer.EOT)}
		if completionOnly {
			docs[i].ScoreFrom = max(0, n-1)
		}
	}
	return docs, nil
}
