package rookworld

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/chess"
)

// Item is one position from a source.
type Item struct {
	FEN string `json:"fen"`
	// StartFEN and History: the moves (UCI, oldest first) that led to FEN.
	// With StartFEN set the history is complete from that position (PGN,
	// generator), so repetitions can be judged; otherwise it holds only the
	// most recent moves, if any (training strings).
	StartFEN string   `json:"start_fen,omitempty"`
	History  []string `json:"history,omitempty"`
	Next     string   `json:"next,omitempty"`   // the move played next in the source, if known
	Sample   *Sample  `json:"sample,omitempty"` // training-string sources: the parsed row
	Task     string   `json:"task,omitempty"`   // a data set's task column: MixPolicy or MixEnv; "" leaves it to the Mix
	Origin   string   `json:"origin"`           // "file:line", "file:line ply n", "generator #n", "file:row"
}

// Game rebuilds the game leading to the item: replayed from StartFEN when the
// history is complete, else a fresh game at FEN.
func (it Item) Game() (*chess.Game, error) {
	if it.StartFEN != "" {
		g, err := chess.ReplayGame(it.StartFEN, it.History)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.Origin, err)
		}
		return g, nil
	}
	return chess.NewGame(it.FEN)
}

// Cursor is a source's position in its stream, small and serialisable, so a
// checkpoint can resume the data exactly where it stopped.
type Cursor struct {
	Kind   string `json:"kind"`
	Path   string `json:"path,omitempty"`
	File   string `json:"file,omitempty"`  // data sets: the file being read, relative to Path
	Offset int64  `json:"offset"`          // byte offset of the next record (or current game)
	Line   int    `json:"line"`            // lines before Offset
	Index  int    `json:"index,omitempty"` // items already taken from the record at Offset
	Epoch  int    `json:"epoch,omitempty"` // completed passes (Loop)
	Count  int64  `json:"count"`           // items produced so far
	RNG    []byte `json:"rng,omitempty"`   // random state (PCG), where the source is seeded
}

// Source streams positions. Next returns io.EOF at the end of a source that
// does not loop. Sources are not safe for concurrent use.
type Source interface {
	Next(ctx context.Context) (Item, error)
	Cursor() Cursor
	Restore(Cursor) error
	Close() error
}

// SourceSpec selects and configures a source with plain values (what a
// binding passes through).
type SourceSpec struct {
	// Kind is "fen" (also EPD), "pgn", "text" (training strings, one per
	// line), "dataset" (parquet, JSONL or gzipped JSONL files, or a directory
	// of their shards: OpenDataSource; "jsonl" is the same) or "generator".
	// Empty: chosen by the path (.fen .epd .pgn .txt; .parquet .jsonl
	// .jsonl.gz and directories are data sets).
	Kind        string           `json:"kind"`
	Path        string           `json:"path"`
	Loop        bool             `json:"loop"`         // start over at the end
	SkipInvalid bool             `json:"skip_invalid"` // skip bad records instead of failing
	Seed        uint64           `json:"seed"`         // PGN sampling
	PerGame     int              `json:"per_game"`     // PGN: positions per game (default 1)
	MinPly      int              `json:"min_ply"`      // PGN: earliest ply sampled
	MaxPly      int              `json:"max_ply"`      // PGN: latest ply sampled (0: game end)
	Split       []string         `json:"split"`        // data sets: the first of these splits the path has (DataOptions)
	TextColumn  string           `json:"text_column"`  // data sets: the column of RookWorld text rows ("text")
	Generator   GeneratorOptions `json:"generator"`
}

// Open opens the source a spec describes.
func Open(spec SourceSpec) (Source, error) {
	kind := spec.Kind
	if kind == "" {
		switch strings.ToLower(filepath.Ext(spec.Path)) {
		case ".fen", ".epd":
			kind = "fen"
		case ".pgn":
			kind = "pgn"
		case ".txt":
			kind = "text"
		default:
			if !isDataSet(spec.Path) {
				return nil, fmt.Errorf("source %q: cannot tell the kind from the extension; set kind", spec.Path)
			}
			kind = "dataset"
		}
	}
	fo := FileOptions{Loop: spec.Loop, SkipInvalid: spec.SkipInvalid}
	if kind == "dataset" || kind == "jsonl" {
		return OpenDataSource(spec.Path, DataOptions{FileOptions: fo, Split: spec.Split, TextColumn: spec.TextColumn})
	}
	if err := notDataOptions(kind, spec); err != nil {
		return nil, err
	}
	switch kind {
	case "fen", "epd":
		return OpenFENFile(spec.Path, fo)
	case "text":
		return OpenSampleFile(spec.Path, false, fo)
	case "pgn":
		return OpenPGNFile(spec.Path, PGNOptions{Seed: spec.Seed, PerGame: spec.PerGame,
			MinPly: spec.MinPly, MaxPly: spec.MaxPly, Loop: spec.Loop, SkipInvalid: spec.SkipInvalid})
	case "generator":
		return NewGenerator(spec.Generator)
	}
	return nil, fmt.Errorf("source: unknown kind %q", kind)
}

// FileOptions apply to line-based file sources.
type FileOptions struct {
	Loop        bool `json:"loop"`
	SkipInvalid bool `json:"skip_invalid"`
}

// lineFile reads lines while tracking byte offsets, so it can seek back to
// any line boundary.
type lineFile struct {
	path   string
	f      *os.File
	r      *bufio.Reader
	offset int64 // offset of the next unread byte
	line   int   // lines consumed
}

func openLineFile(path string) (*lineFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &lineFile{path: path, f: f, r: bufio.NewReaderSize(f, 64*1024)}, nil
}

// next returns a line without its terminator, and its 1-based number.
func (l *lineFile) next() (string, int, error) {
	s, err := l.r.ReadString('\n')
	if len(s) == 0 && err != nil {
		return "", l.line, err
	}
	l.offset += int64(len(s))
	l.line++
	return strings.TrimRight(s, "\r\n"), l.line, nil
}

func (l *lineFile) seek(offset int64, line int) error {
	if _, err := l.f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	l.r.Reset(l.f)
	l.offset, l.line = offset, line
	return nil
}

// FileSource streams items from a line-based file (FEN/EPD or training
// strings); parse turns a line into an item or reports it blank (ok=false).
type FileSource struct {
	kind       string
	lf         *lineFile
	opt        FileOptions
	epoch      int
	count      int64
	epochItems int64
	skipped    int64
	parse      func(text string, origin string) (Item, bool, error)
}

func (s *FileSource) Next(ctx context.Context) (Item, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Item{}, err
		}
		text, n, err := s.lf.next()
		if err == io.EOF {
			if !s.opt.Loop || s.epochItems == 0 {
				return Item{}, io.EOF
			}
			s.epoch++
			s.epochItems = 0
			if err := s.lf.seek(0, 0); err != nil {
				return Item{}, err
			}
			continue
		}
		if err != nil {
			return Item{}, fmt.Errorf("%s:%d: %w", s.lf.path, n+1, err)
		}
		origin := s.lf.path + ":" + strconv.Itoa(n)
		it, ok, err := s.parse(text, origin)
		if err != nil {
			if s.opt.SkipInvalid {
				s.skipped++
				continue
			}
			return Item{}, fmt.Errorf("%s: %w", origin, err)
		}
		if !ok {
			continue
		}
		s.count++
		s.epochItems++
		return it, nil
	}
}

func (s *FileSource) Cursor() Cursor {
	return Cursor{Kind: s.kind, Path: s.lf.path, Offset: s.lf.offset, Line: s.lf.line, Epoch: s.epoch, Count: s.count}
}

func (s *FileSource) Restore(c Cursor) error {
	if c.Kind != s.kind || c.Path != s.lf.path {
		return fmt.Errorf("%s source %s: cursor is for %s source %s", s.kind, s.lf.path, c.Kind, c.Path)
	}
	if err := s.lf.seek(c.Offset, c.Line); err != nil {
		return fmt.Errorf("%s source %s: restore: %w", s.kind, s.lf.path, err)
	}
	s.epoch, s.count = c.Epoch, c.Count
	s.epochItems = 1 // the epoch has produced items before the cursor
	return nil
}

// Skipped counts records skipped as invalid (SkipInvalid).
func (s *FileSource) Skipped() int64 { return s.skipped }

func (s *FileSource) Close() error { return s.lf.f.Close() }

// OpenFENFile streams positions from a file with one FEN or EPD record per
// line; blank lines and lines starting with '#' are skipped. EPD records keep
// their first four fields (clocks default to 0 1); EPD operations are ignored.
func OpenFENFile(path string, opt FileOptions) (*FileSource, error) {
	lf, err := openLineFile(path)
	if err != nil {
		return nil, fmt.Errorf("fen source: %w", err)
	}
	return &FileSource{kind: "fen", lf: lf, opt: opt, parse: parseFENLine}, nil
}

func parseFENLine(text, origin string) (Item, bool, error) {
	t := strings.TrimSpace(text)
	if t == "" || strings.HasPrefix(t, "#") {
		return Item{}, false, nil
	}
	f := strings.Fields(t)
	if len(f) < 4 {
		return Item{}, false, fmt.Errorf("want a FEN or EPD record, got %q", clip(t, 60))
	}
	fen := strings.Join(f[:4], " ")
	if len(f) >= 6 && isUint(f[4]) && isUint(f[5]) {
		fen += " " + f[4] + " " + f[5]
	}
	p, err := parseLegal(fen)
	if err != nil {
		return Item{}, false, err
	}
	return Item{FEN: p.FEN(), Origin: origin}, true, nil
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 31)
	return err == nil
}

// OpenSampleFile streams RookWorld training strings: one per line, or with
// jsonl one JSON object per line whose "text" field holds it. Each row is
// split into prompt and target (Item.Sample).
func OpenSampleFile(path string, jsonl bool, opt FileOptions) (*FileSource, error) {
	lf, err := openLineFile(path)
	if err != nil {
		return nil, fmt.Errorf("sample source: %w", err)
	}
	kind := "text"
	if jsonl {
		kind = "jsonl"
	}
	parse := func(text, origin string) (Item, bool, error) {
		if strings.TrimSpace(text) == "" {
			return Item{}, false, nil
		}
		if jsonl {
			var row struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal([]byte(text), &row); err != nil {
				return Item{}, false, fmt.Errorf("invalid JSON: %w", err)
			}
			if row.Text == nil {
				return Item{}, false, errors.New(`no "text" field`)
			}
			text = *row.Text
		}
		s, err := ParseSample(text)
		if err != nil {
			return Item{}, false, err
		}
		if err := ValidatePosition(s.FEN); err != nil {
			return Item{}, false, err
		}
		return sampleItem(s, origin), true, nil
	}
	return &FileSource{kind: kind, lf: lf, opt: opt, parse: parse}, nil
}

// sampleItem is the item of a parsed training string: an A: row's move is the source's next
// move, played after the moves before it.
func sampleItem(s Sample, origin string) Item {
	it := Item{FEN: s.FEN, Sample: &s, Origin: origin}
	if s.Task == TaskEnv {
		it.Next = s.Move
		if len(s.History) > 0 && s.History[len(s.History)-1] == s.Move {
			it.History = append([]string(nil), s.History[:len(s.History)-1]...)
		}
	}
	return it
}

// newPCG seeds the generator every seeded source uses; its state serialises
// into Cursor.RNG.
func newPCG(seed uint64) *rand.PCG {
	return rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)
}

func pcgState(p *rand.PCG) []byte {
	b, _ := p.MarshalBinary() // cannot fail for PCG
	return b
}
