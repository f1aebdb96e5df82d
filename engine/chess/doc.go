// Package chess is the chess world of rookscript: the RookWorld task formats,
// the rules that judge environment answers, a pool of Stockfish processes that
// judges policy answers, graduated rewards and evaluation metrics, position
// sources, and a builder for RookWorld training text. It holds no Lua; its API
// is plain structs, context.Context on anything slow, and errors that name the
// file, line or field at fault.
//
// # Parts
//
//	position.go  Position: FEN parsing/writing in python-chess conventions, legal moves, SAN
//	game.go      Game (history, repetition), Outcome, EnvStep: the A: task's rules
//	format.go    building P: and A: prompts and targets, Python float formatting
//	parse.go     whitespace-tolerant parsers for completions, prompts and training strings
//	uci.go       Score (side to move, mate conversion) and the UCI info-line parser
//	stockfish.go one engine process: handshake, fixed-depth MultiPV search, kill
//	pool.go      Pool: workers, per-request timeout, restart and retry, shared searches
//	cache.go     in-memory cache and the append-only JSONL cache file
//	reward.go    Scorer: reward components, weights, floors, shaping, batch scoring
//	metrics.go   evaluation metrics over scored answers
//	source.go    Source, Cursor, Item; FEN/EPD and training-string file sources
//	pgn.go       PGN reader (own parser) and the PGN position source
//	generate.go  seeded game generator (random, opening-style, engine-guided)
//	dataset.go   BuildDataset: RookWorld training text labelled by Stockfish and the rules
//
// # Formats: what was confirmed and what was inferred
//
// Confirmed from the public generator code of RookWorld (jorahn/RookWorld:
// dev/data/rook/generate_lichess.py, dev/data/arbiter/generate_rollouts.py and
// make_dataset.py, dev/data/rookworld_evol/make_dataset.py) and its committed
// validation rows:
//
//   - Policy rows are f"P: {fen:90}M: {moves:30}E: {evals:40}B: {best}":
//     each field left-aligned and space-padded to at least 90, 30 and 40
//     characters, longer fields unpadded (PolicyText).
//   - E: values are python-chess's score(mate_score=100000)/100 relative to the
//     side to move, written with Python's str(): "-2.0", "-2.07", "0.3". A mate
//     in n therefore reads ±(1000 − n/100) ("999.97" for mate in 3), being
//     mated now −1000.0 (Score.Pawns, FormatEval). DESIGN's "mate = ±1000.0" is
//     the limit of this; the data itself holds 999.97-style values, and so do
//     the rows built here.
//   - A position with fewer than five legal moves has fewer M:/E: entries.
//   - The public generator shuffled the M:/E: pairs and took B: from the
//     unshuffled MultiPV list: the first line with white to move, the last
//     (the worst of the five) with black to move. BuildDataset writes MultiPV
//     order and B: = Stockfish's best by default; DatasetOptions.
//     ShuffleCandidates and PublicBestQuirk reproduce the public rows.
//     Rewards always judge B: against Stockfish, never against a label.
//   - Environment rows are {fen}+{move}+{recent moves}+{new fen}+{reward}+
//     {terminated}+{truncated}, the recent moves being the last ten including
//     this one, the reward written with str(float) (0.001, 1.0, 0.5, -1.0),
//     flags as 0/1; RookWorld rows carry the prefix "A: " (one public build
//     appends a trailing space, which the parsers ignore). The new FEN is
//     python-chess's board.fen(), terminated is board.is_game_over() (automatic
//     rules only, no draw claims), a win pays the mover 1.0 and a draw 0.5.
//
// Inferred or decided here:
//
//   - The public rollouts pushed moves without a legality check (python-chess's
//     push does not validate), so its rows for well-formed illegal moves show a
//     corrupted board, some even without a king (DESIGN's A: example is such a
//     position). Following DESIGN, an illegal or malformed move here leaves the
//     board unchanged with reward -1.0 and truncated=1, and terminated says
//     whether the unchanged position is already over (normally 0). Positions
//     without a king, or with the side not to move in check, are accepted as
//     python-chess accepts them, so such prompts can still be judged.
//   - Public P: rows were analysed with a 0.1 s time limit; rows and rewards
//     here use a fixed depth, which is what makes them reproducible.
//   - The null move "0000" counts as malformed (python-chess would play it).
//
// # Rules (python-chess semantics on top of notnil/chess)
//
// notnil/chess generates the moves; Position corrects what differs from
// python-chess:
//
//   - Castling rights are cleaned on every position: a right survives only with
//     king and rook on their original squares (notnil keeps the FEN's letters
//     and would even castle without the rook). They are written in KQkq order.
//   - An en-passant square is written only when an en-passant capture is legal
//     (notnil writes it after every double step). One that no pawn can just
//     have passed is dropped before move generation (notnil would invent a
//     capture on it).
//   - notnil is re-fed a fresh FEN after each move: its incremental update keeps
//     a stale king square when a king is captured in the corrupt positions
//     above.
//   - Repetition compares placement, side to move, cleaned castling rights and
//     the en-passant square only when capturable (notnil compares the raw
//     square), counting back to the last irreversible move like python-chess.
//
// Game over, checked in python-chess's order (Position.Outcome, Game.Outcome):
// checkmate (the side to move is in check with no legal move; the other side
// wins); insufficient material (python-chess's rule, for both sides: no pawn,
// rook or queen, and either a lone knight facing only king and queens, or
// bishops all on one square colour with no knight or pawn on the board);
// stalemate (no legal move, not in check); the 75-move rule (halfmove clock
// >= 150); fivefold repetition (the current position occurred five times since
// the last irreversible move). Fivefold needs the game's history: Game tracks
// it and the dataset builder replays sources that carry a full history (PGN,
// generator). An A: prompt carries at most ten moves, too few for five
// occurrences, so EnvStep and the A: reward judge a bare FEN without it.
//
// # Stockfish
//
// A Pool runs Workers UCI processes (default /usr/games/stockfish, Debian's
// stockfish package). Every search sends ucinewgame and runs single-threaded
// to a fixed depth, so a result depends only on (engine, FEN, depth, MultiPV):
// the same request gives the same lines on any worker, in any order. Every
// "info … multipv k … pv …" line is parsed (ParseInfo); the last exact line per
// rank is kept and its first PV move checked for legality. UCI scores are
// already from the side to move; Score keeps centipawns or moves to mate and
// converts to pawns as the data does. A position without a legal move is
// answered without the engine (Analysis.Terminal). Each attempt has a timeout;
// a crashed, killed or hung engine is killed (SIGKILL), replaced and the
// position retried up to Retries times, then the request fails with an error
// naming the FEN. Identical requests in flight share one search. Results are
// cached in memory by FEN+depth+MultiPV and, with CacheFile, appended as one
// JSON line each (one write per line, O_APPEND) to a file read back on the next
// start: a line that is not a valid analysis refuses the file with its
// file:line; entries from another engine version are ignored. Close kills the
// processes.
//
// # Rewards (Scorer)
//
// The task comes from the prompt's prefix; batches may mix tasks and are
// scored in parallel through the pool. Components, each in [0,1]:
//
// Policy (P:), judged against the pool's analysis of the prompt's FEN:
//
//	format       fraction of M:, E:, B: that parse (M: 1–5 UCI tokens; E: one number per M: token; B: one UCI token)
//	moves_legal  fraction of M: tokens that are legal moves
//	best_legal   1 if B: is legal
//	best_rank    RankCredit[k-1] if B: is the engine's line k (default 1.0, 0.7, 0.7, 0.5, 0.5), LegalCredit (0.1) if legal elsewhere, 0 if illegal
//	candidates   distinct M: moves among the engine's lines / number of lines
//	eval         1 − mean over M: of min(|E − engine eval of that move|, EvalClip)/EvalClip (clip 2 pawns; an illegal move counts 1);
//	             a move among the lines takes its line's score, any other legal move the negated score of a MultiPV-1 search one ply shallower after it
//
// Environment (A:), judged by EnvStep on the prompt's FEN and move:
//
//	format        fraction of the four fields that parse (a valid FEN, a number, two flags 0/1)
//	fen_exact     1 if the new FEN equals the rules' FEN exactly
//	fen_similarity normalised Levenshtein similarity to the rules' FEN
//	flags         fraction of terminated, truncated that are right
//	reward_field  1 if the reward field equals the rules' reward numerically
//
// Total: the weighted mean of the components (weights in RewardConfig; the
// FEN weight applies to fen_similarity instead of fen_exact with FENPartial),
// mapped by Shaping (linear t, centered 2t−1, strict all-or-nothing). An
// answer that does not fully parse, or (TruncatedFloor) was cut by
// max_new_tokens, gets MalformedFloor (−0.3) instead; a well-formed policy
// answer whose B: is illegal gets IllegalFloor (−0.1). Components are reported
// either way (Result.Components, Components.Map). For a fixed depth the
// rewards are deterministic. An empty batch gives an empty result; an answer
// that cannot be scored (bad prompt, engine failure) carries Error and makes
// the batch call return an error naming its index, so nothing is silently
// scored as zero.
//
// # Metrics
//
// ComputeMetrics averages over the scored answers of each task (answers with
// Error skipped; a malformed answer counts as a miss):
//
//	p_format        share of P: answers whose M:, E: and B: all parse (format = 1)
//	p_legal_best    share whose B: is a legal move
//	p_best_acc      share whose B: equals Stockfish's best move (MultiPV line 1)
//	p_top5_legal    mean of (distinct legal M: moves) / min(5, legal moves in the position)
//	p_top5_overlap  mean of (distinct M: moves among Stockfish's lines) / (number of lines = min(5, legal moves))
//	a_format        share of A: answers whose four fields all parse
//	a_fen_exact     share whose new FEN is exactly the rules' FEN
//	a_flags_acc     share with both terminated and truncated right
//	a_reward_acc    share whose reward field is right
//
// # Position sources and data
//
// Sources stream Items (FEN, optional history, the next move when known) and
// expose a Cursor, a small JSON-serialisable struct (byte offset, line, random
// state, counts) from which Restore continues exactly: FEN/EPD files, PGN
// files (positions sampled per game with a seeded PCG), training-string files
// (text lines or JSONL with a "text" field, parsed into prompt and target),
// and the Generator (seeded random or opening-style play, optionally following
// the engine). Bad records are errors naming file and line, or are counted and
// skipped with SkipInvalid. BuildDataset turns a source into training text:
// P: rows labelled by the pool, A: rows labelled by the rules (optionally with
// a share of illegal moves), the same bytes for the same seed and depth.
package chess
