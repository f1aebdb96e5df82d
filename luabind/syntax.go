package luabind

import (
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// syntaxMessage turns a gopher-lua load error into lua(1)'s form, FILE:LINE: message.
// gopher-lua reports a block left open at the end of the file only as "at EOF: syntax
// error"; here the source is scanned again to name the block and the line that opened it:
//
//	recipe.lua:12: 'end' expected (to close 'for' at line 5) near <eof>
func syntaxMessage(src, name string, err error) string {
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Cause != nil {
		err = apiErr.Cause // gopher-lua's ApiError does not unwrap
	}
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return strings.TrimSpace(err.Error())
	}
	msg := strings.TrimSpace(pe.Message)
	if pe.Pos.Line != parse.EOF {
		return fmt.Sprintf("%s:%d: %s near '%s'", name, pe.Pos.Line, msg, pe.Token)
	}
	last := strings.Count(strings.TrimRight(src, "\n"), "\n") + 1
	if open, ok := unclosedBlock(src, name); ok {
		return fmt.Sprintf("%s:%d: '%s' expected (to close '%s' at line %d) near <eof>", name, last, open.closer, open.word, open.line)
	}
	return fmt.Sprintf("%s:%d: %s near <eof>", name, last, msg)
}

// opener is a construct waiting for its closing token.
type opener struct {
	word   string // the token that opened it: function, if, for, while, do, repeat, (, {, [
	closer string // the token that closes it: end, until, ), }, ]
	line   int
}

// unclosedBlock returns the innermost construct still open at the end of src.
func unclosedBlock(src, name string) (opener, bool) {
	sc := parse.NewScanner(strings.NewReader(src), name)
	lx := &parse.Lexer{}
	var stack []opener
	push := func(tok ast.Token, closer string) {
		stack = append(stack, opener{word: tok.Str, closer: closer, line: tok.Pos.Line})
	}
	loopHead := false // after 'for'/'while': the next 'do' belongs to it
	for {
		tok, err := sc.Scan(lx)
		if err != nil || tok.Type < 0 {
			break
		}
		lx.PrevTokenType = tok.Type
		switch tok.Type {
		case parse.TFunction, parse.TIf:
			push(tok, "end")
		case parse.TFor, parse.TWhile:
			push(tok, "end")
			loopHead = true
		case parse.TDo:
			if !loopHead {
				push(tok, "end")
			}
			loopHead = false
		case parse.TRepeat:
			push(tok, "until")
		case parse.TEnd, parse.TUntil:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case '(':
			push(tok, ")")
		case '{':
			push(tok, "}")
		case '[':
			push(tok, "]")
		case ')', '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) == 0 {
		return opener{}, false
	}
	return stack[len(stack)-1], true
}
