// Package dataset streams prompt rows from dataset files: parquet (one file, or a directory of
// Hugging Face-style shards) and JSONL, plain or gzipped.
//
// Open takes a path:
//
//	x.parquet, x.jsonl, x.jsonl.gz   one file
//	a directory                      its shards of Options.Split ("train" by default, or "test"):
//	                                 the first of dir/data/<split>-*, dir/<split>-*, dir/<split>/*
//	                                 that has files, of the three kinds above, in name order
//
// Shards named as Hugging Face names them (<split>-00000-of-00003[-suffix].parquet) must all
// be there: a missing one is an error, not fewer rows.
//
// A file holds one of two layouts, decided by its columns (parquet: the schema; JSONL: the first
// non-blank line, which every later line must follow):
//
//	TextRows  a string column Options.TextColumn ("text" by default): RookWorld text rows,
//	          "P: <fen> M: ..." or "A: <fen>+<uci>+...". Row.Text.
//	FENRows   otherwise, a string column "fen" and an optional string column "task".
//	          Row.FEN, Row.Task ("" where the column is absent or the value null).
//
// Other columns are ignored, and a parquet reader reads only the pages of the columns it needs.
// What the text or FEN means (task prefix, legality) is the caller's to check.
//
// Next returns one Row at a time, with the file and its 1-based row number (for JSONL the line
// number: blank lines count as lines and yield no row). Errors are *Error values with a Kind,
// the file, the row and the column. Nothing is dropped silently: a bad row is an error of its
// own, after which Next goes on with the next row (Error.Skippable); a file that cannot be read
// on (Corrupt) ends the Reader. A gzip stream's checksum is checked when it ends, so rows before
// a damaged end have been returned. A damaged parquet page is caught by its CRC where the writer
// recorded one (parquet-go does; pyarrow when asked to): bytes damaged in a page without one may
// decode to other strings. Panics inside the parquet library become Corrupt errors.
//
// Memory is bounded by a file's footer and one page per needed column, whatever the number of
// rows: parquet is read page by page, JSONL line by line (a line may hold at most MaxLineBytes).
//
// Cursor and Seek resume a stream: a Cursor names a file (relative to the opened path) and how
// many rows of it were consumed. Seek skips the files before it unread, whole parquet row groups
// by their row counts in the footer, and within a row group goes to the page the page index
// names (a file without one has that row group's pages of the needed columns read up to the
// row). JSONL is re-read line by line up to the cursor, without decoding the lines.
//
// A Reader is for one goroutine.
package dataset
